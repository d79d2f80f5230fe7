//===- Npy.h - NumPy .npy reader and writer ----------------------*- C++
//-*-===//
//
// Reads and writes the .npy format (versions 1.0, 2.0 and 3.0 headers,
// little-endian, C order). dtypes: f4 f2 f8 i8 i4 i1 u1 b1 (and bf16 written as
// raw "<V2" is not supported by NumPy, so bf16 tensors are read and written as
// f4 by the driver). Errors are returned as messages, never thrown.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_RUNTIME_NPY_H
#define MEMOPT_RUNTIME_NPY_H

#include "memopt/Runtime/Runtime.h"

#include <string>
#include <utility>
#include <vector>

namespace memopt::rt {

struct NpyArray {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data; ///< C-order element bytes

  int64_t numElements() const;
};

/// Parses .npy bytes. Returns false and sets `error` on malformed input.
bool parseNpy(const std::vector<uint8_t> &bytes, NpyArray &out,
              std::string &error);
bool readNpy(const std::string &path, NpyArray &out, std::string &error);
/// Serializes with a version 1.0 header (2.0 if the header needs it).
std::vector<uint8_t> serializeNpy(const NpyArray &array);
bool writeNpy(const std::string &path, const NpyArray &array,
              std::string &error);
/// Writes every (path, array) or none: each goes to `path.partial` first and
/// is renamed once all are written; on failure the partial files are removed.
bool writeNpyFiles(const std::vector<std::pair<std::string, NpyArray>> &files,
                   std::string &error);

/// The index of the first NaN or infinite element of a floating-point
/// array, or -1 (always -1 for integer and bool arrays).
int64_t firstNonFinite(const NpyArray &array);

/// The numpy descr ("<f4", "|b1", ...) of a dtype; empty for BF16.
std::string npyDescr(DType dtype);

} // namespace memopt::rt

#endif // MEMOPT_RUNTIME_NPY_H
