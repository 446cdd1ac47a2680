"""``python -m mucode.cli`` (what torchrun starts on every rank)."""

from mucode.cli.app import main

if __name__ == "__main__":
    main()
