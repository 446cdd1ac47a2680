"""C++ and Java through the verifier's HTTP API on both sandbox backends (real HTTP on loopback).

``/run_code`` as SandboxFusion's clients send it (``language: cpp|java|python3``, ``files`` as base64,
``compile_result`` in the answer, ``Failed`` on a compile error) and ``/v1/verify`` code items with
``spec.language``; code_contests' C++ and Java reference solutions, loaded by mucode's loader, come
back correct on their own tests. One verifier per backend for the module.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mucode.data import load_task_set
from mucode.data.schemas import reference_items
from mucode.verifier.local import local_verifier

CPP_OK = '#include <cstdio>\nint main() { long long a, b; scanf("%lld %lld", &a, &b); printf("%lld\\n", a + b); }\n'
JAVA_OK = (
    "import java.util.*;\npublic class Main { public static void main(String[] x) {\n"
    "  Scanner s = new Scanner(System.in); System.out.println(s.nextLong() + s.nextLong()); } }\n"
)
PROGRAMS = {
    "cpp": {
        "ok": CPP_OK,
        "broken": "int main() { return x; }\n",
        "crash": "#include <cstdlib>\nint main() { std::exit(3); }\n",
        "spin": "int main() { volatile long x = 0; for (;;) x++; }\n",
        "hog": "#include <vector>\n#include <cstdio>\nint main() { std::vector<char*> v;"
        " for (;;) { char* p = new char[1<<20];"
        " for (int i = 0; i < (1<<20); i += 4096) p[i] = 1; v.push_back(p); } }\n",
        "read_file": '#include <fstream>\n#include <iostream>\n#include "data.h"\n'
        'int main() { std::ifstream f("data/in.txt");'
        " std::string s; f >> s; std::cout << s << VALUE << std::endl; }\n",
    },
    "java": {
        "ok": JAVA_OK,
        "broken": "public class Main { public static void main(String[] a) { return x; } }\n",
        "crash": "public class Main { public static void main(String[] a) { System.exit(3); } }\n",
        "spin": "public class Main { public static void main(String[] a) { long x = 0; while (x >= 0) x++; } }\n",
        "hog": "import java.util.*;\npublic class Main { public static void main(String[] a) {"
        " List<long[]> v = new ArrayList<>(); for (;;) v.add(new long[1 << 17]); } }\n",
        "read_file": "import java.nio.file.*;\n"
        "public class Main { public static void main(String[] a) throws Exception {"
        ' System.out.println(Files.readString(Path.of("data/in.txt")).trim() + "7"); } }\n',
    },
}
BACKENDS = [
    pytest.param("local", id="local"),
    pytest.param("docker", id="docker", marks=pytest.mark.docker),
]


@pytest.fixture(scope="module", params=BACKENDS)
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "local":
        options: dict[str, object] = {"slots": 2, "uid_base": 63300}
    else:
        image = os.environ.get("MUCODE_SANDBOX_IMAGE", "mucode-sandbox:latest")
        options = {"containers": 1, "slots_per_container": 2, "uid_base": 10700, "image": image}
    with local_verifier(request.param, programs=["code"], backend_options=options) as base:
        yield base


def run(url: str, code: str, language: str, **fields: object) -> dict:
    r = httpx.post(f"{url}/run_code", json={"code": code, "language": language, **fields}, timeout=180)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.parametrize("lang", ["cpp", "java"])
def test_run_code(url: str, lang: str) -> None:
    progs = PROGRAMS[lang]
    ok = run(url, progs["ok"], lang, stdin="20 22\n", run_timeout=10)
    assert ok["status"] == "Success", ok
    assert ok["run_result"]["stdout"] == "42\n" and ok["run_result"]["return_code"] == 0
    assert ok["compile_result"]["status"] == "Finished" and ok["compile_result"]["return_code"] == 0

    bad = run(url, progs["broken"], lang, run_timeout=10)
    assert bad["status"] == "Failed" and bad["run_result"] is None, bad
    assert bad["compile_result"]["status"] == "Finished" and bad["compile_result"]["return_code"] != 0
    assert "error" in bad["compile_result"]["stderr"]

    crash = run(url, progs["crash"], lang, run_timeout=10)
    assert crash["status"] == "Failed" and crash["run_result"]["return_code"] == 3, crash

    spin = run(url, progs["spin"], lang, run_timeout=10, cpu_timeout=1)
    assert spin["status"] == "Failed" and spin["run_result"]["status"] == "TimeLimitExceeded", spin

    hog = run(url, progs["hog"], lang, run_timeout=10, memory_limit_MB=128)
    assert hog["status"] == "Failed" and hog["message"] == "memory_limit", hog

    files = {
        "data/in.txt": base64.b64encode(b"value-\n").decode(),
        "data.h": base64.b64encode(b"#define VALUE 7\n").decode(),
    }
    got = run(url, progs["read_file"], lang, run_timeout=10, files=files)
    assert got["status"] == "Success" and got["run_result"]["stdout"] == "value-7\n", got


def test_run_code_languages_and_bad_files(url: str) -> None:
    assert run(url, "print(input())", "python3", stdin="hi\n")["run_result"]["stdout"] == "hi\n"
    assert run(url, "print(1)", "python")["compile_result"] is None
    r = httpx.post(f"{url}/run_code", json={"code": "fn main() {}", "language": "rust"})
    assert r.status_code == 422 and "cpp" in r.json()["problems"][0]
    r = httpx.post(
        f"{url}/run_code", json={"code": "print(1)", "language": "python", "files": {"../x": "eA=="}}
    )
    assert r.status_code == 422 and "relative path" in r.text
    r = httpx.post(
        f"{url}/run_code", json={"code": "print(1)", "language": "python", "files": {"x": "*not*"}}
    )
    assert r.status_code == 422 and "base64" in r.text


def item(id_: str, lang: str, program: str, outputs: list[str]) -> dict:
    tests = {"format": "stdio", "inputs": ["1 2\n", "10 -3\n"], "outputs": outputs}
    fence = {"cpp": "cpp", "java": "java"}[lang]
    response = f"Here it is.\n```{fence}\n{program}```<|im_end|>"
    return {"id": id_, "program": "code", "response": response, "spec": {"tests": tests, "language": lang}}


def test_verify_spec_language(url: str) -> None:
    items = []
    for lang in ("cpp", "java"):
        items += [
            item(f"{lang}-ok", lang, PROGRAMS[lang]["ok"], ["3", "7"]),
            item(f"{lang}-wrong", lang, PROGRAMS[lang]["ok"], ["3", "8"]),
            item(f"{lang}-broken", lang, PROGRAMS[lang]["broken"], ["3", "7"]),
        ]
    r = httpx.post(f"{url}/v1/verify", json={"items": items}, timeout=300)
    assert r.status_code == 200, r.text
    got = {res["id"]: (res["reward"], res["status"]) for res in r.json()["results"]}
    for lang in ("cpp", "java"):
        assert got[f"{lang}-ok"] == (1.0, "correct"), got
        assert got[f"{lang}-wrong"] == (0.0, "wrong_answer"), got
        assert got[f"{lang}-broken"] == (0.0, "compile_error"), got
    call = item("x", "cpp", CPP_OK, ["3", "7"])
    call["spec"]["tests"] = {"format": "call", "fn_name": "f", "inputs": ["1"], "outputs": ["1"]}
    r = httpx.post(f"{url}/v1/verify", json={"items": [call]})
    assert r.status_code == 422 and "stdio tests only" in r.text


def test_code_contests_references_pass_their_tests(url: str, tmp_path: Path) -> None:
    row = {
        "name": "sum",
        "description": "Print the sum of two integers.",
        "public_tests": {"input": ["1 2\n"], "output": ["3\n"]},
        "private_tests": {"input": ["5 5\n"], "output": ["10\n"]},
        "generated_tests": {"input": ["-7 1\n"], "output": ["-6\n"]},
        "solutions": {
            "language": [2, 4, 3, 1, 2, 2],
            "solution": [CPP_OK, JAVA_OK, "print(sum(map(int, input().split())))", "print 1", CPP_OK, CPP_OK],
        },
        "time_limit": {"seconds": 2, "nanos": 0},
        "memory_limit_bytes": 256 << 20,
    }
    path = tmp_path / "cc" / "train-00000-of-00001.parquet"
    path.parent.mkdir()
    pq.write_table(pa.Table.from_pylist([row]), path)
    record = load_task_set(str(path), "code").records[0]
    assert [ref["language"] for ref in record.meta["references"]] == ["cpp", "java", "python", "cpp"]
    r = httpx.post(f"{url}/v1/verify", json={"items": reference_items(record)}, timeout=300)
    assert r.status_code == 200, r.text
    assert [res["status"] for res in r.json()["results"]] == ["correct"] * 4, r.json()
