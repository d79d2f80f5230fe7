#!/usr/bin/env python3
"""Checks a memopt-plan output CSV on its own, sharing no code with the
planner: offsets >= 0, aligned, within the arena, and no two buffers live
together sharing bytes. Prints 'valid arena=N' or the first problem found."""
import csv
import sys


def main():
    path, arena_limit = sys.argv[1], int(sys.argv[2])
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    items = []
    for row in rows:
        size, offset = int(row["size"]), int(row["offset"])
        align = int(row.get("alignment") or 1)
        if offset < 0 or offset % align:
            print(f"bad offset for buffer {row['id']}")
            return 1
        items.append((int(row["lower"]), int(row["upper"]), offset,
                      offset + size, row["id"]))
    arena = max((end for *_, end, _ in items), default=0)
    if arena > arena_limit:
        print(f"arena {arena} exceeds {arena_limit}")
        return 1
    items = [i for i in items if i[3] > i[2]]
    items.sort()
    for x, (lo, hi, begin, end, name) in enumerate(items):
        for lo2, hi2, begin2, end2, name2 in items[x + 1:]:
            if lo2 >= hi:
                break
            if begin < end2 and begin2 < end:
                print(f"buffers {name} and {name2} overlap")
                return 1
    print(f"valid arena={arena} buffers={len(rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
