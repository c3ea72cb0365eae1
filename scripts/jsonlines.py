"""Read the JSON lines `berth bench -json` appends, for the plot scripts."""
import json
import sys


def records(path):
    """Yield (line number, record) for each non-blank line of path; a line
    that is not JSON ends the program with its file and line."""
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                yield n, json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"{path}:{n}: not JSON: {e}")
