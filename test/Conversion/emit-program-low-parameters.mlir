// RUN: memopt-opt %s --memopt-bufferize --memopt-plan-memory -o %t.mlir
// RUN: memopt-compile %t.mlir --lower-only --emit source -o %t --quiet
// RUN: FileCheck %s < %t.cpp
// RUN: python3 -c "import os, sys; print('weight file', os.path.getsize(sys.argv[1]))" %t.weights | FileCheck %s --check-prefix=FILE
// RUN: python3 -c "import struct, sys; d = open(sys.argv[1], 'rb').read(); m = struct.unpack('<256f', d[1540:2564]); print('master', m[0], m[255], 'low', d[0:2].hex())" %t.weights | FileCheck %s --check-prefix=BYTES

// The lowering of a low working parameter (docs/offload.md, "Low working
// parameters"): the bf16 variable is a Parameter of the weight table, saved
// as its f32 master (kWholeWeights: F32, no offset); its update is the
// offloaded one, with the bf16 parameter (the runtime rounds the master into
// it); an f32 parameter keeps its own entry.
// CHECK: const TensorInfo kWeights[] = {
// CHECK-NEXT: {"w", DType::BF16, 1, {256}, 0, nullptr, WeightRole::Parameter},
// CHECK-NEXT: {"b", DType::F32, 1, {256}, 512, nullptr, WeightRole::Parameter},
// CHECK: const TensorInfo kWholeWeights[] = {
// CHECK-NEXT: {"w", DType::F32, 1, {256}, -1, nullptr, WeightRole::Parameter},
// CHECK-NEXT: {"b", DType::F32, 1, {256}, 512, nullptr, WeightRole::Parameter},
// CHECK: offloadSgdUpdate(ctx, {{"[^"]*"}}, 0, H + {{[0-9]+}}, 0.0f, 0.0f, [[W:t[0-9]+]],
// CHECK: kWholeWeights

// The weight file: the region (1,540 bytes: w's 512 bytes of zeros, which the
// runtime overwrites with the master's rounding, b's 1,024 and the learning
// rate), then w's f32 master (1,024 bytes: its initial value; b's master is
// b's own value, copied at load), then the 24-byte trailer.
// FILE: weight file 2588
// BYTES: master 0.75 0.75 low 0000
func.func @low(%x: tensor<256xbf16>) -> tensor<256xbf16> {
  %w = memopt.variable "w" {role = "parameter"} : tensor<256xbf16>
  %m = memopt.variable "w.master" {initial_value = dense<0.75> : tensor<256xf32>, memopt.placement = "host", role = "master"} : tensor<256xf32>
  %b = memopt.variable "b" {initial_value = dense<0.5> : tensor<256xf32>, role = "parameter"} : tensor<256xf32>
  %bm = memopt.variable "b.master" {initial_value = dense<0.5> : tensor<256xf32>, memopt.placement = "host", role = "master"} : tensor<256xf32>
  %lr = memopt.variable "memopt.learning_rate" {initial_value = dense<0.1> : tensor<f32>, role = "learning_rate"} : tensor<f32>
  %y = memopt.add %x, %w : (tensor<256xbf16>, tensor<256xbf16>) -> tensor<256xbf16>
  %g = memopt.exp %y : tensor<256xbf16>
  memopt.sgd_update %w, %g, lr %lr master %m : tensor<256xbf16>, tensor<256xbf16>, tensor<f32>, tensor<256xf32>
  %g2 = memopt.exp %g : tensor<256xbf16>
  memopt.sgd_update %b, %g2, lr %lr master %bm : tensor<256xf32>, tensor<256xbf16>, tensor<f32>, tensor<256xf32>
  return %y : tensor<256xbf16>
}
