"""Compares the predicted micro-step times of two --fit reports made with the same
kernel-times entries, one file stating its "<micro-batch>" M (scaled by the roofline's work,
docs/fit.md "Predicted time") and one without (the times used as they are): prints, per
micro-batch m planned without recomputation in both, each report's micro-step at m over its
micro-step at M, one decimal: how the prediction grows with the micro-batch."""
import json
import sys


def micro_steps(path):
    points = json.load(open(path))["fit"]["points"]
    return {p["micro_batch"]: p["micro_step_seconds"] for p in points
            if p["planned"] and p["arena_budget_bytes"] == 0}


scaled, as_is = micro_steps(sys.argv[1]), micro_steps(sys.argv[2])
measured = int(sys.argv[3])
for batch in sorted(set(scaled) & set(as_is)):
    print(f"micro-batch {batch}: scaled {scaled[batch] / scaled[measured]:.1f}, "
          f"as is {as_is[batch] / as_is[measured]:.1f}")
