//===- WeightsFile.h - the weight file's trailer and fingerprint -*- C++-*-===//
//
// A weight file is the raw weight-region image (ProgramInfo::weightBytes
// bytes; with --offload optimizer's f16 / bf16 working parameters, their f32
// masters after it: Program.h's weightFileBytes) followed by a 24-byte
// trailer: the magic "MEMOPTWT", the program's fingerprint and that size,
// both little-endian uint64. The
// fingerprint hashes (FNV-1a, 64 bit) the weight table: every weight's name,
// rank, shape, byte offset and byte size, and the region size. The compiler
// computes it while it lays the weights out (EmitProgram.cpp) and the runtime
// from the program's table (Driver.cpp), so a weight file of another model,
// or of another compilation with a different layout, is refused. Header-only
// and free of MLIR: both sides include it.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_RUNTIME_WEIGHTSFILE_H
#define MEMOPT_RUNTIME_WEIGHTSFILE_H

#include <cstdint>
#include <cstring>
#include <string>

namespace memopt::rt {

constexpr char kWeightsMagic[8] = {'M', 'E', 'M', 'O', 'P', 'T', 'W', 'T'};
constexpr size_t kWeightsTrailerBytes = 24;

/// Incremental FNV-1a over the weight table.
class WeightsFingerprint {
public:
  void addWeight(const char *name, int64_t rank, const int64_t *shape,
                 int64_t offset, int64_t bytes) {
    addBytes(name, std::strlen(name) + 1);
    addInt(rank);
    for (int64_t i = 0; i < rank; ++i)
      addInt(shape[i]);
    addInt(offset);
    addInt(bytes);
  }
  /// The fingerprint of the table added so far and a region of
  /// `regionBytes`.
  uint64_t finish(int64_t regionBytes) const {
    WeightsFingerprint copy = *this;
    copy.addInt(regionBytes);
    return copy.hash;
  }

private:
  void addBytes(const void *data, size_t size) {
    const auto *bytes = static_cast<const unsigned char *>(data);
    for (size_t i = 0; i < size; ++i) {
      hash ^= bytes[i];
      hash *= 0x100000001b3ULL;
    }
  }
  void addInt(int64_t value) {
    for (int i = 0; i < 8; ++i) {
      unsigned char byte =
          static_cast<unsigned char>(uint64_t(value) >> (8 * i));
      addBytes(&byte, 1);
    }
  }
  uint64_t hash = 0xcbf29ce484222325ULL;
};

/// The 24-byte trailer for a region of `regionBytes` and `fingerprint`.
inline std::string weightsTrailer(uint64_t fingerprint, int64_t regionBytes) {
  std::string trailer(kWeightsMagic, sizeof(kWeightsMagic));
  for (uint64_t value : {fingerprint, uint64_t(regionBytes)})
    for (int i = 0; i < 8; ++i)
      trailer.push_back(static_cast<char>(value >> (8 * i)));
  return trailer;
}

/// Reads a trailer; false when `data` (kWeightsTrailerBytes long) is none.
inline bool parseWeightsTrailer(const unsigned char *data,
                                uint64_t &fingerprint, int64_t &regionBytes) {
  if (std::memcmp(data, kWeightsMagic, sizeof(kWeightsMagic)) != 0)
    return false;
  uint64_t values[2] = {0, 0};
  for (int v = 0; v < 2; ++v)
    for (int i = 0; i < 8; ++i)
      values[v] |= uint64_t(data[8 + 8 * v + i]) << (8 * i);
  fingerprint = values[0];
  regionBytes = int64_t(values[1]);
  return true;
}

} // namespace memopt::rt

#endif // MEMOPT_RUNTIME_WEIGHTSFILE_H
