"""Checks a --fit report (its "fit" section, docs/fit.md): the chosen configuration fits the
limit and no configuration that fits is predicted faster; prints the chosen configuration."""
import json
import sys

report = json.load(open(sys.argv[1]))
fit = report["fit"]
chosen = fit["points"][fit["chosen"]]
assert chosen["fits"] and chosen["device_bytes"] <= fit["limit_bytes"], chosen
fitting = [p for p in fit["points"] if p["fits"]]
assert all(p["device_bytes"] <= fit["limit_bytes"] for p in fitting)
assert chosen["samples_per_second"] == max(p["samples_per_second"] for p in fitting)
assert chosen["micro_batch"] * chosen["accumulate"] == fit["global_batch"]
# The compiled plan is what the search counted (arena and weight region).
assert report["arena_bytes"] <= chosen["arena_bytes"] or chosen["arena_budget_bytes"], report
print("chosen", chosen["choices"]["precision"], "offload",
      chosen["choices"].get("offload", "-"), chosen["micro_batch"], chosen["accumulate"],
      "fits", "planned", len([p for p in fit["points"] if p["planned"]]), "of",
      len(fit["points"]), "pareto", len([p for p in fit["points"] if p["pareto"]]))
