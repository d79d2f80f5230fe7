"""Per log: how often the chosen algorithm (first usable) is slower than the fastest found one
that needed more workspace or failed, and the chosen algorithms' total time."""
import collections, sys
for path in sys.argv[1:]:
    chosen_ms = best_ms = 0.0
    algos = collections.Counter(); ws_limited = 0; n = 0; epi = collections.Counter()
    lines = open(path).read().splitlines()
    for line in lines:
        if " epilogue " in line:
            epi[line.rsplit("-> ", 1)[-1]] += 1
            continue
        if not line.startswith("memopt conv:") or not line.rstrip().endswith(":") and " found:" not in line:
            continue
        head, _, rest = line.partition(" found:")
        if not _:
            continue
        kind = head.split()[3]
        entries = [e.split(":") for e in rest.split()]
        ok = [e for e in entries if len(e) == 4]
        anyok = [e for e in entries if len(e) == 4 or e[4] == "ws"]
        n += 1
        if ok:
            chosen_ms += float(ok[0][1]); algos[(kind, ok[0][0], ok[0][3])] += 1
        if anyok:
            best_ms += float(anyok[0][1])
            if ok and anyok[0] is not ok[0] and float(anyok[0][1]) < 0.9 * float(ok[0][1]):
                ws_limited += 1
    print(f"{path.rsplit('/',1)[-1]}: {n} searches, chosen sum {chosen_ms:.3f} ms, best-with-any-workspace sum "
          f"{best_ms:.3f} ms, {ws_limited} workspace-limited; epilogue {dict(epi)}")
    print("   (kind, algo, math): count", dict(algos.most_common(12)))
