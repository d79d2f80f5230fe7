//===- Csv.cpp - MiniMalloc CSV reading and writing -----------------------===//

#include "memopt/Planner/Csv.h"

#include <charconv>
#include <map>
#include <vector>

namespace memopt::planner {

namespace {

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t'))
    text.remove_prefix(1);
  while (!text.empty() &&
         (text.back() == ' ' || text.back() == '\t' || text.back() == '\r'))
    text.remove_suffix(1);
  return text;
}

std::vector<std::string_view> splitFields(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t begin = 0;
  while (true) {
    size_t comma = line.find(',', begin);
    fields.push_back(trim(line.substr(begin, comma - begin)));
    if (comma == std::string_view::npos)
      return fields;
    begin = comma + 1;
  }
}

bool parseInteger(std::string_view text, int64_t &value) {
  if (text.empty())
    return false;
  const char *first = text.data(), *last = text.data() + text.size();
  auto [end, code] = std::from_chars(first, last, value);
  return code == std::errc() && end == last;
}

enum Column { Id, Lower, Upper, Size, Alignment, Offset, NumColumns };
const char *const kColumnNames[] = {"id",   "lower",     "upper",
                                    "size", "alignment", "offset"};

} // namespace

bool parseProblemCsv(std::string_view text, CsvProblem &result,
                     std::string &error) {
  result = CsvProblem();
  std::vector<int> columnOf; // Field index -> Column.
  int fieldOfColumn[NumColumns] = {-1, -1, -1, -1, -1, -1};
  std::map<int64_t, int> lineOfId;
  bool sawHeader = false;
  int lineNumber = 0;
  size_t position = 0;
  while (position < text.size()) {
    size_t newline = text.find('\n', position);
    std::string_view line = text.substr(position, newline - position);
    position = newline == std::string_view::npos ? text.size() : newline + 1;
    ++lineNumber;
    std::string prefix = "line " + std::to_string(lineNumber) + ": ";
    if (trim(line).empty())
      continue;
    std::vector<std::string_view> fields = splitFields(line);

    if (!sawHeader) {
      sawHeader = true;
      for (size_t f = 0; f < fields.size(); ++f) {
        int column = -1;
        for (int c = 0; c < NumColumns; ++c)
          if (fields[f] == kColumnNames[c])
            column = c;
        if (column < 0) {
          error = prefix + "unknown column '" + std::string(fields[f]) +
                  "' (expected id, lower, upper, size, and optionally "
                  "alignment)";
          return false;
        }
        if (fieldOfColumn[column] >= 0) {
          error =
              prefix + "column '" + std::string(fields[f]) + "' appears twice";
          return false;
        }
        fieldOfColumn[column] = static_cast<int>(f);
        columnOf.push_back(column);
      }
      for (int c = Id; c <= Size; ++c) {
        if (fieldOfColumn[c] < 0) {
          error = prefix + "missing column '" + kColumnNames[c] +
                  "' in the header (expected id,lower,upper,size)";
          return false;
        }
      }
      result.hasAlignment = fieldOfColumn[Alignment] >= 0;
      continue;
    }

    if (fields.size() != columnOf.size()) {
      error = prefix + "expected " + std::to_string(columnOf.size()) +
              " fields, found " + std::to_string(fields.size());
      return false;
    }
    int64_t values[NumColumns] = {0, 0, 0, 0, 1, 0};
    for (size_t f = 0; f < fields.size(); ++f) {
      if (columnOf[f] == Offset)
        continue;
      if (!parseInteger(fields[f], values[columnOf[f]])) {
        error = prefix + "column '" + kColumnNames[columnOf[f]] + "': '" +
                std::string(fields[f]) + "' is not an integer";
        return false;
      }
    }
    Buffer buffer{values[Id], values[Lower], values[Upper], values[Size],
                  values[Alignment]};
    std::string name = "buffer " + std::to_string(buffer.id);
    if (buffer.size < 0) {
      error =
          prefix + name + " has negative size " + std::to_string(buffer.size);
      return false;
    }
    if (buffer.size > 0 && buffer.upper <= buffer.lower) {
      error = prefix + name + " has upper (" + std::to_string(buffer.upper) +
              ") <= lower (" + std::to_string(buffer.lower) + ")";
      return false;
    }
    if (buffer.alignment < 1) {
      error = prefix + name + " has alignment " +
              std::to_string(buffer.alignment) + " (must be >= 1)";
      return false;
    }
    auto [it, inserted] = lineOfId.insert({buffer.id, lineNumber});
    if (!inserted) {
      error = prefix + "duplicate id " + std::to_string(buffer.id) +
              " (first on line " + std::to_string(it->second) + ")";
      return false;
    }
    result.problem.buffers.push_back(buffer);
  }
  if (!sawHeader) {
    error = "line 1: empty input, expected a header 'id,lower,upper,size'";
    return false;
  }
  if (std::string problemError = checkProblem(result.problem);
      !problemError.empty()) {
    error = problemError;
    return false;
  }
  return true;
}

std::string writePlanCsv(const CsvProblem &input, const Plan &plan) {
  std::string out = input.hasAlignment
                        ? "id,lower,upper,size,alignment,offset\n"
                        : "id,lower,upper,size,offset\n";
  const std::vector<Buffer> &buffers = input.problem.buffers;
  for (size_t i = 0; i < buffers.size(); ++i) {
    const Buffer &b = buffers[i];
    out += std::to_string(b.id) + ',' + std::to_string(b.lower) + ',' +
           std::to_string(b.upper) + ',' + std::to_string(b.size) + ',';
    if (input.hasAlignment)
      out += std::to_string(b.alignment) + ',';
    out += std::to_string(i < plan.offsets.size() ? plan.offsets[i] : 0);
    out += '\n';
  }
  return out;
}

} // namespace memopt::planner
