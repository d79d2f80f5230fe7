//===- ExactSolver.cpp - Checkmate-style MILP over staged schedules -------===//
//
// Variables, in position space (stage t computes position t for the first
// time; n = node count):
//   R[t][i]    binary, 0 <= i <= t: position i is computed in stage t
//              (R[t][t] = 1).
//   S[t][i]    binary, 0 <= i < t: a copy of i is resident when stage t
//              starts (Checkmate's checkpoint matrix).
//   L[t][k][i] continuous in [0, 1], 0 <= k <= t, i < t: the copy of i is
//              counted in the memory at slot k of stage t.
// Constraints:
//   R[t][j] <= R[t][i] + S[t][i]          for every edge i -> j, j <= t
//   S[t+1][i] <= S[t][i] + R[t][i]        a kept copy existed
//   R[t][i] + S[t][i] <= 1                recomputing a resident value is
//                                         never useful (its readers in the
//                                         stage all come after slot i)
//   sum_t R[t][i] <= limit(i)             Moccasin's C
//   L[t][j][i] >= R[t][j]                 an input is counted at its read
//   L[t][t][i] >= S[t+1][i]               a kept copy is counted to the end
//   L[t][k][i] >= L[t][k+1][i]            ... and back to where it appeared:
//   (at k = i: L[t][i][i] >= L[t][i+1][i] - R[t][i], a recomputed copy
//    starts at its slot and is counted there through R)
//   sum_i bytes(i) L[t][k][i] + (bytes(k) + scratch(k)) R[t][k] <= budget
//                                                              every slot
// In-place reuse (Node::inPlaceInput) is not modelled: the MILP then counts
// an in-place step as if it wrote a new buffer, a stricter model whose
// schedules are valid but whose optimality and infeasibility proofs are not
// (Remat.cpp does not claim them for such graphs).
// Objective: minimize sum cost(i) R[t][i].
// Where Checkmate tracks frees with O(n^2 E) binaries, the L chains give the
// same memory with continuous variables: at an optimum each L is the 0/1
// "still needed" of the schedule, and a slot with no computation is never
// fuller than the next slot that has one.
//
//===----------------------------------------------------------------------===//

#include "memopt/Remat/ExactSolver.h"

#include <coin/Cbc_C_Interface.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace memopt::remat {

namespace {

int64_t gcdOf(const std::vector<int64_t> &values) {
  int64_t g = 0;
  for (int64_t v : values)
    g = std::gcd(g, v);
  return g == 0 ? 1 : g;
}

class MilpBuilder {
public:
  explicit MilpBuilder(int count) : count(count) {
    rOffset = 0;
    sOffset = rOffset + count * (count + 1) / 2;
    lOffset = sOffset + count * (count - 1) / 2;
    lStart.resize(count + 1);
    int64_t next = lOffset;
    for (int t = 0; t < count; ++t) {
      lStart[t] = next;
      next += static_cast<int64_t>(t + 1) * t;
    }
    lStart[count] = next;
  }
  int r(int t, int i) const { return rOffset + t * (t + 1) / 2 + i; }
  int s(int t, int i) const { return sOffset + t * (t - 1) / 2 + i; }
  int l(int t, int k, int i) const {
    return static_cast<int>(lStart[t] + static_cast<int64_t>(k) * t + i);
  }
  int64_t columns() const { return lStart[count]; }

private:
  int count;
  int rOffset, sOffset, lOffset;
  std::vector<int64_t> lStart;
};

} // namespace

ExactResult solveExact(const Graph &graph, const ExactOptions &options) {
  ExactResult result;
  StagedEvaluator evaluator(graph);
  int n = evaluator.size();
  MilpBuilder index(n);
  result.variables = index.columns();

  std::vector<int64_t> bytes(n), costs(n), scratch(n);
  for (int p = 0; p < n; ++p) {
    bytes[p] = evaluator.bytesAt(p);
    costs[p] = evaluator.costAt(p);
    scratch[p] = evaluator.scratchAt(p);
  }
  // Scale to small integers: the solver's tolerances are then far below one
  // unit of bytes or cost.
  std::vector<int64_t> allBytes(bytes);
  allBytes.insert(allBytes.end(), scratch.begin(), scratch.end());
  int64_t byteUnit = gcdOf(allBytes), costUnit = gcdOf(costs);
  int64_t budgetUnits = options.budget / byteUnit;

  Cbc_Model *model = Cbc_newModel();
  Cbc_setLogLevel(model, 0);
  auto column = [&](double lower, double upper, double objective,
                    bool integer) {
    Cbc_addCol(model, "", lower, upper, objective, integer ? 1 : 0, 0, nullptr,
               nullptr);
  };
  for (int t = 0; t < n; ++t)
    for (int i = 0; i <= t; ++i) {
      int limit =
          computationLimit(graph, evaluator.nodeAt(i), options.maxComputations);
      double upper = (i == t || limit > 1) ? 1.0 : 0.0;
      column(i == t ? 1.0 : 0.0, upper,
             static_cast<double>(costs[i] / costUnit), true);
    }
  for (int t = 1; t < n; ++t)
    for (int i = 0; i < t; ++i)
      column(0.0, 1.0, 0.0, true);
  for (int t = 0; t < n; ++t)
    for (int k = 0; k <= t; ++k)
      for (int i = 0; i < t; ++i)
        column(0.0, 1.0, 0.0, false);

  std::vector<int> cols;
  std::vector<double> coefs;
  auto row = [&](char sense, double rhs) {
    Cbc_addRow(model, "", static_cast<int>(cols.size()), cols.data(),
               coefs.data(), sense, rhs);
    ++result.constraints;
    cols.clear();
    coefs.clear();
  };
  auto term = [&](int col, double coef) {
    cols.push_back(col);
    coefs.push_back(coef);
  };

  for (int t = 0; t < n; ++t) {
    // Dependences.
    for (int j = 1; j <= t; ++j)
      for (int i : evaluator.inputsAt(j)) {
        term(index.r(t, j), 1);
        term(index.r(t, i), -1);
        term(index.s(t, i), -1);
        row('L', 0);
      }
    for (int i = 0; i < t; ++i) {
      term(index.r(t, i), 1);
      term(index.s(t, i), 1);
      row('L', 1);
      if (t + 1 < n) {
        term(index.s(t + 1, i), 1);
        term(index.s(t, i), -1);
        term(index.r(t, i), -1);
        row('L', 0);
      }
    }
    // Liveness chains.
    for (int i = 0; i < t; ++i) {
      for (int j : evaluator.usersAt(i)) {
        if (j > t)
          break;
        term(index.l(t, j, i), 1);
        term(index.r(t, j), -1);
        row('G', 0);
      }
      if (t + 1 < n) {
        term(index.l(t, t, i), 1);
        term(index.s(t + 1, i), -1);
        row('G', 0);
      }
      for (int k = t - 1; k >= 0; --k) {
        term(index.l(t, k, i), 1);
        term(index.l(t, k + 1, i), -1);
        if (k == i)
          term(index.r(t, i), 1);
        row('G', 0);
      }
    }
    // Memory at every slot.
    for (int k = 0; k <= t; ++k) {
      for (int i = 0; i < t; ++i)
        if (bytes[i] > 0)
          term(index.l(t, k, i), static_cast<double>(bytes[i] / byteUnit));
      double rhs = static_cast<double>(budgetUnits);
      int64_t computing = bytes[k] + scratch[k];
      if (k == t)
        rhs -= static_cast<double>(computing / byteUnit);
      else if (computing > 0)
        term(index.r(t, k), static_cast<double>(computing / byteUnit));
      row('L', rhs);
    }
  }
  // Computation limits above 1 (a limit of 1 fixed the bounds already).
  for (int i = 0; i < n; ++i) {
    int limit =
        computationLimit(graph, evaluator.nodeAt(i), options.maxComputations);
    if (limit <= 1 || limit >= n - i)
      continue;
    for (int t = i; t < n; ++t)
      term(index.r(t, i), 1);
    row('L', limit);
  }

  if (options.start) {
    StagedEvaluator::PositionPlan start = evaluator.toPositions(*options.start);
    int64_t excess = 0;
    evaluator.run(start, options.budget, excess);
    if (excess == 0) {
      // R and S of the start plan; CBC completes the continuous part.
      std::vector<int> startCols;
      std::vector<double> startValues;
      const std::vector<int> &events = evaluator.events();
      const std::vector<int> &lastUse = evaluator.lastUse();
      const std::vector<int> &stageStart = evaluator.stageStart();
      std::vector<std::vector<char>> computed(n, std::vector<char>(n, 0));
      for (int i = 0; i < n; ++i) {
        computed[i][i] = 1;
        for (int stage : start[i])
          computed[stage][i] = 1;
      }
      for (int t = 0; t < n; ++t)
        for (int i = 0; i <= t; ++i) {
          startCols.push_back(index.r(t, i));
          startValues.push_back(computed[t][i]);
        }
      // S[t][i]: the newest copy of i before stage t is read in stage t or
      // later.
      std::vector<int> newest(n, -1);
      for (int t = 1; t < n; ++t) {
        for (int e = stageStart[t - 1]; e < stageStart[t]; ++e)
          newest[events[e]] = e;
        for (int i = 0; i < t; ++i) {
          startCols.push_back(index.s(t, i));
          startValues.push_back(
              newest[i] >= 0 && lastUse[newest[i]] >= stageStart[t] ? 1.0
                                                                    : 0.0);
        }
      }
      Cbc_setMIPStartI(model, static_cast<int>(startCols.size()),
                       startCols.data(), startValues.data());
    }
  }

  Cbc_setParameter(model, "timeMode", "elapsed");
  Cbc_setMaximumSeconds(model, options.timeLimitSeconds);
  // Costs are integers in `costUnit`s: a gap below one unit is optimal.
  Cbc_setAllowableGap(model, 0.999);
  Cbc_solve(model);

  bool proved = Cbc_isProvenOptimal(model);
  const double *solution = Cbc_bestSolution(model);
  result.lowerBound =
      Cbc_getBestPossibleObjValue(model) * static_cast<double>(costUnit);
  if (Cbc_isProvenInfeasible(model)) {
    result.status = ExactStatus::Infeasible;
  } else if (solution) {
    result.status = proved ? ExactStatus::Optimal : ExactStatus::Feasible;
    StagedEvaluator::PositionPlan plan(n);
    for (int t = 0; t < n; ++t)
      for (int i = 0; i < t; ++i)
        if (solution[index.r(t, i)] > 0.5)
          plan[i].push_back(t);
    result.plan = evaluator.fromPositions(plan);
    result.totalCost = 0;
    for (int i = 0; i < n; ++i)
      result.totalCost += costs[i] * (1 + static_cast<int64_t>(plan[i].size()));
  }
  Cbc_deleteModel(model);
  return result;
}

} // namespace memopt::remat
