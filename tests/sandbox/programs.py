"""C++ and Java programs for the sandbox tests: a correct one per language and one *attack tool* per
language that does, on stdin ``NAME [ARG]``, one hostile thing (fork bomb, memory, output, time,
files, exec, network, signals, daemons) or the benign ``sum``. One tool per language means one
compile per backend for the whole hostile suite (tests/sandbox/test_compiled.py).

Every hostile branch first checks, as the Python tests' GUARD does, that it runs unprivileged in a
pid namespace other than the host's; otherwise it prints ``UNSAFE`` and exits 99.
"""

# ruff: noqa: E501  (C++ and Java sources, one statement a line)
from __future__ import annotations

import os

HOST_PIDNS = os.readlink("/proc/self/ns/pid")

CPP_SUM = """#include <bits/stdc++.h>
int main() { long long a, b; std::cin >> a >> b; std::cout << a + b << std::endl; }
"""

JAVA_SUM = """import java.util.*;
public class Solution {
    public static void main(String[] args) {
        Scanner in = new Scanner(System.in);
        long a = in.nextLong(), b = in.nextLong();
        System.out.println(a + b);
    }
}
"""

CPP_TOOL = r"""#include <bits/stdc++.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <dirent.h>
using namespace std;

static string slurp(const string& path) { ifstream f(path); stringstream s; s << f.rdbuf(); return s.str(); }
static string field(const string& status, const string& key) {
    size_t i = status.find("\n" + key + ":");
    if (i == string::npos) return "?";
    istringstream s(status.substr(i + key.size() + 2)); string v; s >> v; return v;
}
static string pidns() { char buf[256]; ssize_t n = readlink("/proc/self/ns/pid", buf, sizeof buf - 1); return string(buf, n > 0 ? n : 0); }
static void guard() {
    if (getuid() == 0 || geteuid() == 0 || pidns() == "HOST_PIDNS") { puts("UNSAFE"); exit(99); }
}
static bool can_create(const string& dir) {
    string p = dir + "/mucode-escape";
    int fd = open(p.c_str(), O_CREAT | O_WRONLY, 0755);
    if (fd < 0) return false;
    close(fd); return true;
}

int main() {
    string what; cin >> what;
    if (what == "sum") { long long a, b; cin >> a >> b; cout << a + b << endl; return 0; }
    if (what == "probe") {
        string st = slurp("/proc/self/status");
        cout << getuid() << " " << field(st, "CapEff") << " " << field(st, "NoNewPrivs") << " " << pidns() << endl;
        return 0;
    }
    guard();
    if (what == "fork") { for (;;) fork(); }
    if (what == "memory") {
        for (;;) { char* p = new char[1 << 20]; memset(p, 1, 1 << 20); }
    }
    if (what == "spin") { volatile unsigned long x = 0; for (;;) x++; }
    if (what == "sleep") { sleep(600); }
    if (what == "output") { static char buf[65536]; memset(buf, 'y', sizeof buf); for (;;) fwrite(buf, 1, sizeof buf, stdout); }
    if (what == "disk") {
        FILE* f = fopen("big", "wb"); static char buf[1 << 20]; memset(buf, 'x', sizeof buf);
        for (;;) if (fwrite(buf, 1, sizeof buf, f) != sizeof buf || fflush(f) != 0) { perror("write"); return 1; }
    }
    if (what == "files") {
        char exe[4096]; ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1); exe[n > 0 ? n : 0] = 0;
        string build = string(exe).substr(0, string(exe).rfind('/'));
        char cwd[4096]; if (!getcwd(cwd, sizeof cwd)) return 3;
        string parent = string(cwd).substr(0, string(cwd).rfind('/'));
        vector<string> wrote;
        for (string d : {"/", "/tmp", "/var/tmp", "/dev/shm", "/etc", "/usr", "/opt/sandbox", "/run/mucode",
                         "/scratch", "/build", build.c_str(), parent.c_str()})
            if (can_create(d)) wrote.push_back(d);
        bool here = can_create(".");
        cout << (wrote.empty() && here ? "confined" : "ESCAPED");
        for (auto& d : wrote) cout << " " << d;
        cout << endl; return 0;
    }
    if (what == "exec") {  // a copy of ourselves in the (noexec) scratch dir cannot be run
        ifstream src("/proc/self/exe", ios::binary); ofstream dst("copy", ios::binary); dst << src.rdbuf(); dst.close();
        chmod("copy", 0755);
        pid_t pid = fork();
        if (pid == 0) { execl("./copy", "./copy", (char*)nullptr); _exit(errno == EACCES ? 13 : 1); }
        int status = 0; waitpid(pid, &status, 0);
        cout << (WIFEXITED(status) && WEXITSTATUS(status) == 13 ? "noexec" : "EXECUTED") << endl; return 0;
    }
    if (what == "network") {
        int port; cin >> port; int s = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{}; a.sin_family = AF_INET; a.sin_port = htons(port); a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        cout << (s >= 0 && connect(s, (sockaddr*)&a, sizeof a) == 0 ? "connected" : "blocked") << endl; return 0;
    }
    if (what == "signals") {
        vector<int> hit; DIR* d = opendir("/proc"); dirent* e;
        while ((e = readdir(d))) {
            int pid = atoi(e->d_name);
            if (pid > 0 && pid != getpid() && kill(pid, SIGKILL) == 0) hit.push_back(pid);
        }
        if (kill(1, SIGSTOP) == 0) hit.push_back(1);
        cout << (hit.empty() ? "denied" : "HIT") << endl; return 0;
    }
    if (what == "daemon") {
        if (fork() == 0) { setsid(); if (fork() == 0) { sleep(300); _exit(0); } _exit(0); }
        usleep(200000); cout << "daemonized" << endl; return 0;
    }
    cout << "unknown " << what << endl; return 2;
}
""".replace("HOST_PIDNS", HOST_PIDNS)

JAVA_TOOL = r"""import java.io.*;
import java.net.*;
import java.nio.file.*;
import java.util.*;

public class Main {
    static String status(String key) throws IOException {
        for (String line : Files.readAllLines(Paths.get("/proc/self/status")))
            if (line.startsWith(key + ":")) return line.substring(key.length() + 1).trim().split("\\s+")[0];
        return "?";
    }
    static String pidns() throws IOException { return Files.readSymbolicLink(Paths.get("/proc/self/ns/pid")).toString(); }
    static void guard() throws IOException {
        if (status("Uid").equals("0") || pidns().equals("HOST_PIDNS")) { System.out.println("UNSAFE"); System.exit(99); }
    }
    static boolean canCreate(String dir) {
        try { return new File(dir, "mucode-escape").createNewFile() || new File(dir, "mucode-escape").exists(); }
        catch (IOException | SecurityException e) { return false; }
    }

    public static void main(String[] args) throws Exception {
        Scanner in = new Scanner(System.in);
        String what = in.next();
        if (what.equals("sum")) { System.out.println(in.nextLong() + in.nextLong()); return; }
        if (what.equals("probe")) {
            System.out.println(status("Uid") + " " + status("CapEff") + " " + status("NoNewPrivs") + " " + pidns());
            return;
        }
        guard();
        switch (what) {
            case "fork": {  // a shell fork bomb started from the JVM
                new ProcessBuilder("/bin/sh", "-c", "f() { f | f & }; f").start();
                Thread.sleep(600_000);
            }
            case "threads": {
                for (;;) new Thread(() -> { try { Thread.sleep(600_000); } catch (InterruptedException e) { } }).start();
            }
            case "memory": {
                List<long[]> keep = new ArrayList<>();
                for (;;) keep.add(new long[1 << 20]);
            }
            case "spin": { long x = 0; for (;;) { x++; if (x == -1) System.out.println(x); } }
            case "sleep": Thread.sleep(600_000); return;
            case "output": {
                byte[] buf = new byte[65536]; Arrays.fill(buf, (byte) 'y');
                OutputStream out = new BufferedOutputStream(new FileOutputStream(FileDescriptor.out));
                for (;;) out.write(buf);
            }
            case "disk": {
                byte[] buf = new byte[1 << 20];
                try (FileOutputStream f = new FileOutputStream("big")) { for (;;) f.write(buf); }
            }
            case "files": {
                String build = System.getProperty("java.class.path");
                String parent = new File(System.getProperty("user.dir")).getParent();
                List<String> wrote = new ArrayList<>();
                for (String d : new String[] {"/", "/tmp", "/var/tmp", "/dev/shm", "/etc", "/usr", "/opt/sandbox",
                                              "/run/mucode", "/scratch", "/build", build, parent})
                    if (canCreate(d)) wrote.add(d);
                System.out.println(wrote.isEmpty() && canCreate(".") ? "confined" : "ESCAPED " + wrote);
                return;
            }
            case "exec": {
                Files.copy(Paths.get("/bin/true"), Paths.get("copy"));
                new File("copy").setExecutable(true);
                try { new ProcessBuilder("./copy").start().waitFor(); System.out.println("EXECUTED"); }
                catch (IOException e) { System.out.println(e.getMessage().contains("error=13") ? "noexec" : "other " + e); }
                return;
            }
            case "network": {
                int port = in.nextInt();
                try (Socket s = new Socket()) { s.connect(new InetSocketAddress("127.0.0.1", port), 2000); System.out.println("connected"); }
                catch (IOException e) { System.out.println("blocked"); }
                return;
            }
            case "signals": {
                long me = ProcessHandle.current().pid();
                boolean hit = ProcessHandle.allProcesses().filter(p -> p.pid() != me && !p.parent().map(q -> q.pid() == me).orElse(false))
                    .anyMatch(p -> p.destroyForcibly() && waitGone(p));
                System.out.println(hit ? "HIT" : "denied");
                return;
            }
            case "daemon": {
                new ProcessBuilder("/bin/sh", "-c", "setsid sleep 300 </dev/null >/dev/null 2>&1 &").start().waitFor();
                System.out.println("daemonized");
                return;
            }
            default: System.out.println("unknown " + what); System.exit(2);
        }
    }
    static boolean waitGone(ProcessHandle p) {
        try { Thread.sleep(100); } catch (InterruptedException e) { }
        return !p.isAlive();
    }
}
""".replace("HOST_PIDNS", HOST_PIDNS)
