"""tests.tiers: every ctest case of a build is in exactly one tier (label quick or slow), the quick
tier holds at least MIN_QUICK cases, and every case tests/slow-cases.txt names exists. Prints the
count of each tier.

    check_tiers.py --ctest CTEST --build BUILD --slow-cases FILE
"""

import argparse
import json
import subprocess
import sys

TIERS = ("quick", "slow")
MIN_QUICK = 150  # the quick tier is the loop a change is checked in: most of the suite's cases


def cases(ctest, build):
    """{name: labels} of every case ctest lists in BUILD (discovering the GoogleTest cases)."""
    out = subprocess.run(
        [ctest, "--test-dir", build, "--show-only=json-v1"], capture_output=True, text=True, check=True, timeout=240
    ).stdout
    found = {}
    for test in json.loads(out)["tests"]:
        labels = next((p["value"] for p in test.get("properties", []) if p["name"] == "LABELS"), [])
        found[test["name"]] = labels
    return found


def slow_names(path):
    with open(path, encoding="utf-8") as f:
        return [line.split()[0] for line in f if line.strip() and not line.startswith("#")]


def problems(found, slow):
    bad = []
    for name, labels in sorted(found.items()):
        tiers = [t for t in TIERS if t in labels]
        if len(tiers) != 1:
            bad.append(f"{name}: labels {labels} hold {'both tiers' if tiers else 'no tier'} (quick or slow)")
    quick = sum("quick" in labels for labels in found.values())
    if quick < MIN_QUICK:
        bad.append(f"the quick tier has {quick} cases, fewer than {MIN_QUICK}")
    bad += [f"slow-cases.txt names {name}, which is no case of this build" for name in slow if name not in found]
    bad += [
        f"slow-cases.txt names {name}, labelled {found[name]}"
        for name in slow
        if name in found and "slow" not in found[name]
    ]
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ctest", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--slow-cases", required=True)
    args = ap.parse_args()
    found = cases(args.ctest, args.build)
    bad = problems(found, slow_names(args.slow_cases))
    counts = {t: sum(t in labels for labels in found.values()) for t in TIERS}
    print(f"{len(found)} cases: {counts['quick']} quick, {counts['slow']} slow")
    for line in bad:
        print(line, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
