//===- Npy.cpp - NumPy .npy reader and writer -----------------------------===//
//
// Follows the format description in numpy/lib/format.py (NEP 1): magic
// "\x93NUMPY", version byte pair, little-endian header length (2 bytes for
// 1.0, 4 bytes for 2.0/3.0), then a Python dict literal with 'descr',
// 'fortran_order' and 'shape', padded so the data starts 64-byte aligned.
//
//===----------------------------------------------------------------------===//

#include "memopt/Runtime/Npy.h"

#include "Internal.h"

#include <cmath>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

namespace memopt::rt {

int64_t NpyArray::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string npyDescr(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "<f4";
  case DType::F16:
    return "<f2";
  case DType::F64:
    return "<f8";
  case DType::I64:
    return "<i8";
  case DType::I32:
    return "<i4";
  case DType::I8:
    return "|i1";
  case DType::U8:
    return "|u1";
  case DType::Bool:
    return "|b1";
  case DType::BF16:
    return "";
  }
  return "";
}

namespace {

bool descrToDType(const std::string &descr, DType &dtype) {
  struct Entry {
    const char *names[3];
    DType dtype;
  };
  static const Entry table[] = {
      {{"<f4", "f4", "float32"}, DType::F32},
      {{"<f2", "f2", "float16"}, DType::F16},
      {{"<f8", "f8", "float64"}, DType::F64},
      {{"<i8", "i8", "int64"}, DType::I64},
      {{"<i4", "i4", "int32"}, DType::I32},
      {{"|i1", "<i1", "i1"}, DType::I8},
      {{"|u1", "<u1", "u1"}, DType::U8},
      {{"|b1", "<b1", "b1"}, DType::Bool},
  };
  for (const Entry &e : table)
    for (const char *name : e.names)
      if (descr == name) {
        dtype = e.dtype;
        return true;
      }
  return false;
}

void skipSpaces(const std::string &s, size_t &pos) {
  while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\n'))
    ++pos;
}

// Finds the value text after 'key': in the header dict.
bool findKey(const std::string &header, const char *key, size_t &pos) {
  std::string quoted1 = std::string("'") + key + "'";
  std::string quoted2 = std::string("\"") + key + "\"";
  size_t at = header.find(quoted1);
  size_t len = quoted1.size();
  if (at == std::string::npos) {
    at = header.find(quoted2);
    len = quoted2.size();
  }
  if (at == std::string::npos)
    return false;
  pos = at + len;
  skipSpaces(header, pos);
  if (pos >= header.size() || header[pos] != ':')
    return false;
  ++pos;
  skipSpaces(header, pos);
  return pos < header.size();
}

} // namespace

bool parseNpy(const std::vector<uint8_t> &bytes, NpyArray &out,
              std::string &error) {
  static const char magic[] = "\x93NUMPY";
  if (bytes.size() < 10 || std::memcmp(bytes.data(), magic, 6) != 0) {
    error = "not a .npy file (bad magic)";
    return false;
  }
  int major = bytes[6];
  size_t headerLen, headerStart;
  if (major == 1) {
    headerLen = bytes[8] | size_t(bytes[9]) << 8;
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) {
      error = "truncated .npy header";
      return false;
    }
    headerLen = bytes[8] | size_t(bytes[9]) << 8 | size_t(bytes[10]) << 16 |
                size_t(bytes[11]) << 24;
    headerStart = 12;
  } else {
    error = "unsupported .npy version " + std::to_string(major);
    return false;
  }
  if (headerStart + headerLen > bytes.size()) {
    error = "truncated .npy header";
    return false;
  }
  std::string header(bytes.begin() + headerStart,
                     bytes.begin() + headerStart + headerLen);

  size_t pos;
  if (!findKey(header, "descr", pos) ||
      (header[pos] != '\'' && header[pos] != '"')) {
    error = "header has no 'descr'";
    return false;
  }
  char quote = header[pos];
  size_t end = header.find(quote, pos + 1);
  if (end == std::string::npos) {
    error = "malformed 'descr'";
    return false;
  }
  std::string descr = header.substr(pos + 1, end - pos - 1);
  if (!descrToDType(descr, out.dtype)) {
    error = "unsupported dtype '" + descr +
            "' (supported: <f4 <f2 <f8 <i8 <i4 |i1 |u1 |b1, little-endian)";
    return false;
  }

  if (!findKey(header, "fortran_order", pos)) {
    error = "header has no 'fortran_order'";
    return false;
  }
  if (header.compare(pos, 4, "True") == 0) {
    error = "Fortran-order arrays are not supported (save in C order)";
    return false;
  }

  if (!findKey(header, "shape", pos) || header[pos] != '(') {
    error = "header has no 'shape' tuple";
    return false;
  }
  out.shape.clear();
  ++pos;
  while (true) {
    skipSpaces(header, pos);
    if (pos >= header.size()) {
      error = "malformed 'shape'";
      return false;
    }
    if (header[pos] == ')')
      break;
    if (header[pos] == ',') {
      ++pos;
      continue;
    }
    if (header[pos] < '0' || header[pos] > '9') {
      error = "malformed 'shape'";
      return false;
    }
    int64_t d = 0;
    while (pos < header.size() && header[pos] >= '0' && header[pos] <= '9') {
      d = d * 10 + (header[pos] - '0');
      if (d > (int64_t(1) << 48)) {
        error = "dimension too large in 'shape'";
        return false;
      }
      ++pos;
    }
    out.shape.push_back(d);
  }
  if (out.shape.size() > size_t(kMaxRank)) {
    error = "rank " + std::to_string(out.shape.size()) + " exceeds " +
            std::to_string(kMaxRank);
    return false;
  }
  // The element count must fit int64 (NpyArray::numElements), in every
  // prefix too: a zero dimension after two large ones makes no bytes, but
  // their product still overflows before the zero.
  int64_t elements = 1;
  for (int64_t d : out.shape)
    if (__builtin_mul_overflow(elements, d, &elements)) {
      error = "'shape' is too large (its element count overflows)";
      return false;
    }
  // Count in unsigned arithmetic with overflow checks: dimensions up to
  // 2^48 multiply past int64.
  uint64_t dataBytes = dtypeSize(out.dtype);
  for (int64_t d : out.shape)
    if (__builtin_mul_overflow(dataBytes, uint64_t(d), &dataBytes)) {
      error = "'shape' is too large (its byte count overflows)";
      return false;
    }
  size_t dataStart = headerStart + headerLen;
  if (bytes.size() - dataStart < dataBytes) {
    error = "truncated data: expected " + std::to_string(dataBytes) +
            " bytes, found " + std::to_string(bytes.size() - dataStart);
    return false;
  }
  out.data.assign(bytes.begin() + dataStart,
                  bytes.begin() + dataStart + dataBytes);
  return true;
}

bool readNpy(const std::string &path, NpyArray &out, std::string &error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = "cannot open '" + path + "'";
    return false;
  }
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  if (!parseNpy(bytes, out, error)) {
    error = "'" + path + "': " + error;
    return false;
  }
  return true;
}

namespace {

/// The magic, version, header length and header: everything before the data.
std::vector<uint8_t> npyPrefix(const NpyArray &array) {
  std::string header = "{'descr': '" + npyDescr(array.dtype) +
                       "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < array.shape.size(); ++i) {
    header += std::to_string(array.shape[i]);
    if (array.shape.size() == 1 || i + 1 < array.shape.size())
      header += ",";
    if (i + 1 < array.shape.size())
      header += " ";
  }
  header += "), }";
  // Pad with spaces and a final newline so data starts 64-byte aligned.
  size_t prefix = 10;
  size_t total = prefix + header.size() + 1;
  bool v2 = false;
  size_t padded = (total + 63) / 64 * 64;
  if (padded - prefix > 65535) {
    v2 = true;
    prefix = 12;
    total = prefix + header.size() + 1;
    padded = (total + 63) / 64 * 64;
  }
  header.append(padded - total, ' ');
  header += '\n';

  std::vector<uint8_t> bytes = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  bytes.push_back(v2 ? 2 : 1);
  bytes.push_back(0);
  size_t len = header.size();
  bytes.push_back(uint8_t(len));
  bytes.push_back(uint8_t(len >> 8));
  if (v2) {
    bytes.push_back(uint8_t(len >> 16));
    bytes.push_back(uint8_t(len >> 24));
  }
  bytes.insert(bytes.end(), header.begin(), header.end());
  return bytes;
}

} // namespace

std::vector<uint8_t> serializeNpy(const NpyArray &array) {
  std::vector<uint8_t> bytes = npyPrefix(array);
  bytes.insert(bytes.end(), array.data.begin(), array.data.end());
  return bytes;
}

int64_t firstNonFinite(const NpyArray &array) {
  if (!isFloatType(array.dtype))
    return -1;
  int64_t n = array.numElements();
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(loadAsDouble(array.data.data(), array.dtype, i)))
      return i;
  return -1;
}

bool writeNpyFiles(const std::vector<std::pair<std::string, NpyArray>> &files,
                   std::string &error) {
  // Every file goes to a temporary name first; only when all are written are
  // they renamed, so a failure leaves no output behind, new or half-written.
  std::vector<std::string> written;
  auto discard = [&] {
    for (const std::string &temporary : written)
      std::remove(temporary.c_str());
  };
  for (const auto &[path, array] : files) {
    std::string temporary = path + ".partial";
    written.push_back(temporary);
    if (!writeNpy(temporary, array, error)) {
      discard();
      return false;
    }
  }
  for (size_t i = 0; i < files.size(); ++i)
    if (std::rename(written[i].c_str(), files[i].first.c_str()) != 0) {
      error = "cannot rename '" + written[i] + "' to '" + files[i].first + "'";
      discard();
      return false;
    }
  return true;
}

bool writeNpy(const std::string &path, const NpyArray &array,
              std::string &error) {
  if (npyDescr(array.dtype).empty()) {
    error = std::string("cannot write dtype ") + dtypeName(array.dtype) +
            " to .npy";
    return false;
  }
  // The prefix, then the data from where it is (no copy of a large array).
  std::vector<uint8_t> prefix = npyPrefix(array);
  std::ofstream out(path, std::ios::binary);
  if (!out) {
    error = "cannot create '" + path + "'";
    return false;
  }
  out.write(reinterpret_cast<const char *>(prefix.data()),
            std::streamsize(prefix.size()));
  out.write(reinterpret_cast<const char *>(array.data.data()),
            std::streamsize(array.data.size()));
  if (!out) {
    error = "cannot write '" + path + "'";
    return false;
  }
  return true;
}

} // namespace memopt::rt
