// RUN: memopt-opt %s -split-input-file --canonicalize | FileCheck %s

// Shapes are static, so Shape folds; arithmetic on small constants folds too.
// CHECK-LABEL: func.func @shape_arith
// CHECK-NEXT: %[[C:.*]] = memopt.constant dense<[4, 6]> : tensor<2xi64>
// CHECK-NEXT: return %[[C]]
func.func @shape_arith(%x: tensor<2x3xf32>) -> tensor<2xi64> {
  %s = memopt.shape %x : (tensor<2x3xf32>) -> tensor<2xi64>
  %t = memopt.add %s, %s : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
  return %t : tensor<2xi64>
}

// -----

// CHECK-LABEL: func.func @reshape_chain
// CHECK-NEXT: %[[R:.*]] = memopt.reshape %arg0 : (tensor<2x3xf32>) -> tensor<6xf32>
// CHECK-NEXT: return %[[R]]
func.func @reshape_chain(%x: tensor<2x3xf32>) -> tensor<6xf32> {
  %0 = memopt.reshape %x : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %1 = memopt.reshape %0 : (tensor<3x2xf32>) -> tensor<6xf32>
  return %1 : tensor<6xf32>
}

// -----

// The sub-graph PyTorch exports for `x.view(x.size(0), -1)`:
// Shape -> Gather(0) -> Unsqueeze -> Concat with [-1] -> (Reshape's shape).
// The importer resolves the reshape itself; the shape computation must fold
// to one constant and the ops that computed it must disappear.
// CHECK-LABEL: func.func @pytorch_view_chain
// CHECK-DAG: %[[SHAPE:.*]] = memopt.constant dense<[2, -1]> : tensor<2xi64>
// CHECK-DAG: %[[R:.*]] = memopt.reshape %arg0 : (tensor<2x3x4xf32>) -> tensor<2x12xf32>
// CHECK-NOT: memopt.shape
// CHECK-NOT: memopt.gather
// CHECK-NOT: memopt.unsqueeze
// CHECK-NOT: memopt.concat
// CHECK: return %[[R]], %[[SHAPE]]
func.func @pytorch_view_chain(%x: tensor<2x3x4xf32>) -> (tensor<2x12xf32>, tensor<2xi64>) {
  %shape = memopt.shape %x : (tensor<2x3x4xf32>) -> tensor<3xi64>
  %zero = memopt.constant dense<0> : tensor<i64>
  %batch = memopt.gather %shape, %zero {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %batch1 = memopt.unsqueeze %batch {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %minus1 = memopt.constant dense<-1> : tensor<1xi64>
  %target = memopt.concat %batch1, %minus1 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
  %r = memopt.reshape %x : (tensor<2x3x4xf32>) -> tensor<2x12xf32>
  return %r, %target : tensor<2x12xf32>, tensor<2xi64>
}

// -----

// Shape with `start` and integer division of the result.
// CHECK-LABEL: func.func @shape_slice_div
// CHECK-NEXT: %[[C:.*]] = memopt.constant dense<[5, 1]> : tensor<2xi64>
// CHECK-NEXT: return %[[C]]
func.func @shape_slice_div(%x: tensor<2x10x7xf32>) -> tensor<2xi64> {
  %s = memopt.shape %x {start = 1 : i64} : (tensor<2x10x7xf32>) -> tensor<2xi64>
  %d = memopt.constant dense<[2, 7]> : tensor<2xi64>
  %q = memopt.div %s, %d : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
  return %q : tensor<2xi64>
}

// -----

// Integer division truncates toward zero (ONNX, C), not toward -inf.
// CHECK-LABEL: func.func @div_int_truncates
// CHECK-NEXT: %[[C:.*]] = memopt.constant dense<[-3, 3, -3, 0]> : tensor<4xi64>
// CHECK-NEXT: return %[[C]]
func.func @div_int_truncates() -> tensor<4xi64> {
  %a = memopt.constant dense<[-7, 7, 7, 1]> : tensor<4xi64>
  %b = memopt.constant dense<[2, 2, -2, 3]> : tensor<4xi64>
  %q = memopt.div %a, %b : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  return %q : tensor<4xi64>
}

// -----

// Division by an integer zero is left to run time.
// CHECK-LABEL: func.func @div_by_zero_stays
// CHECK: memopt.div
func.func @div_by_zero_stays() -> tensor<2xi64> {
  %a = memopt.constant dense<[4, 5]> : tensor<2xi64>
  %b = memopt.constant dense<[2, 0]> : tensor<2xi64>
  %q = memopt.div %a, %b : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
  return %q : tensor<2xi64>
}

// -----

// Broadcasting of non-splat constants: [2,1] - [3] -> [2,3]; floats.
// CHECK-LABEL: func.func @sub_mul_broadcast
// CHECK-DAG: memopt.constant dense<{{\[\[}}9, 8, 7], [19, 18, 17]]> : tensor<2x3xi32>
// CHECK-DAG: memopt.constant dense<{{\[\[}}1.500000e+00, 3.000000e+00], [-1.500000e+00, -3.000000e+00]]> : tensor<2x2xf32>
// CHECK-DAG: memopt.constant dense<[2.500000e-01, -5.000000e-01]> : tensor<2xf32>
func.func @sub_mul_broadcast() -> (tensor<2x3xi32>, tensor<2x2xf32>, tensor<2xf32>) {
  %a = memopt.constant dense<[[10], [20]]> : tensor<2x1xi32>
  %b = memopt.constant dense<[1, 2, 3]> : tensor<3xi32>
  %d = memopt.sub %a, %b : (tensor<2x1xi32>, tensor<3xi32>) -> tensor<2x3xi32>
  %f = memopt.constant dense<[[1.0], [-1.0]]> : tensor<2x1xf32>
  %g = memopt.constant dense<[1.5, 3.0]> : tensor<2xf32>
  %m = memopt.mul %f, %g : (tensor<2x1xf32>, tensor<2xf32>) -> tensor<2x2xf32>
  %h = memopt.constant dense<[1.0, -2.0]> : tensor<2xf32>
  %four = memopt.constant dense<4.0> : tensor<f32>
  %q = memopt.div %h, %four : (tensor<2xf32>, tensor<f32>) -> tensor<2xf32>
  return %d, %m, %q : tensor<2x3xi32>, tensor<2x2xf32>, tensor<2xf32>
}

// -----

// CHECK-LABEL: func.func @compare_and_logic
// CHECK-DAG: %[[EQ:.*]] = memopt.constant dense<[false, true, false]> : tensor<3xi1>
// CHECK-DAG: %[[LT:.*]] = memopt.constant dense<[true, false, false]> : tensor<3xi1>
// CHECK-DAG: %[[GT:.*]] = memopt.constant dense<[false, false, true]> : tensor<3xi1>
// CHECK-DAG: %[[NOT:.*]] = memopt.constant dense<[true, false, true]> : tensor<3xi1>
// CHECK-DAG: %[[AND:.*]] = memopt.constant dense<false> : tensor<3xi1>
// CHECK-DAG: %[[OR:.*]] = memopt.constant dense<[true, true, false]> : tensor<3xi1>
// CHECK: return %[[EQ]], %[[LT]], %[[GT]], %[[NOT]], %[[AND]], %[[OR]]
func.func @compare_and_logic() -> (tensor<3xi1>, tensor<3xi1>, tensor<3xi1>, tensor<3xi1>, tensor<3xi1>, tensor<3xi1>) {
  %a = memopt.constant dense<[-1, 2, 3]> : tensor<3xi64>
  %b = memopt.constant dense<2> : tensor<i64>
  %eq = memopt.equal %a, %b : (tensor<3xi64>, tensor<i64>) -> tensor<3xi1>
  %lt = memopt.less %a, %b : (tensor<3xi64>, tensor<i64>) -> tensor<3xi1>
  %gt = memopt.greater %a, %b : (tensor<3xi64>, tensor<i64>) -> tensor<3xi1>
  %not = memopt.not %eq : tensor<3xi1>
  %and = memopt.and %lt, %gt : (tensor<3xi1>, tensor<3xi1>) -> tensor<3xi1>
  %or = memopt.or %lt, %eq : (tensor<3xi1>, tensor<3xi1>) -> tensor<3xi1>
  return %eq, %lt, %gt, %not, %and, %or : tensor<3xi1>, tensor<3xi1>, tensor<3xi1>, tensor<3xi1>, tensor<3xi1>, tensor<3xi1>
}

// -----

// Unsigned compare: 200 as ui8 is larger than 100.
// CHECK-LABEL: func.func @compare_unsigned_and_float
// CHECK-DAG: memopt.constant dense<[true, false]> : tensor<2xi1>
// CHECK-DAG: memopt.constant dense<[false, true]> : tensor<2xi1>
func.func @compare_unsigned_and_float() -> (tensor<2xi1>, tensor<2xi1>) {
  %a = memopt.constant dense<[200, 50]> : tensor<2xui8>
  %b = memopt.constant dense<100> : tensor<2xui8>
  %gt = memopt.greater %a, %b : (tensor<2xui8>, tensor<2xui8>) -> tensor<2xi1>
  %f = memopt.constant dense<[0.5, 2.5]> : tensor<2xf32>
  %g = memopt.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %fgt = memopt.greater %f, %g : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xi1>
  return %gt, %fgt : tensor<2xi1>, tensor<2xi1>
}

// -----

// CHECK-LABEL: func.func @where_three_way
// CHECK-NEXT: %[[C:.*]] = memopt.constant dense<{{\[\[}}1, 20], [1, 20]]> : tensor<2x2xi64>
// CHECK-NEXT: return %[[C]]
func.func @where_three_way() -> tensor<2x2xi64> {
  %c = memopt.constant dense<[true, false]> : tensor<2xi1>
  %x = memopt.constant dense<[[1], [1]]> : tensor<2x1xi64>
  %y = memopt.constant dense<[10, 20]> : tensor<2xi64>
  %w = memopt.where %c, %x, %y : (tensor<2xi1>, tensor<2x1xi64>, tensor<2xi64>) -> tensor<2x2xi64>
  return %w : tensor<2x2xi64>
}

// -----

// CHECK-LABEL: func.func @cast_values
// CHECK-DAG: memopt.constant dense<[-2, 3, 0]> : tensor<3xi64>
// CHECK-DAG: memopt.constant dense<[-2.000000e+00, 3.000000e+00, 0.000000e+00]> : tensor<3xf16>
// CHECK-DAG: memopt.constant dense<[true, true, false]> : tensor<3xi1>
// CHECK-DAG: memopt.constant dense<[-2, 3, 0]> : tensor<3xi8>
// CHECK-DAG: memopt.constant dense<[2.550000e+02, 1.000000e+00]> : tensor<2xf32>
func.func @cast_values() -> (tensor<3xi64>, tensor<3xf16>, tensor<3xi1>, tensor<3xi8>, tensor<2xf32>) {
  %f = memopt.constant dense<[-2.7, 3.9, 0.2]> : tensor<3xf32>
  %i = memopt.cast %f : (tensor<3xf32>) -> tensor<3xi64>
  %h = memopt.cast %i : (tensor<3xi64>) -> tensor<3xf16>
  %b = memopt.cast %i : (tensor<3xi64>) -> tensor<3xi1>
  %n = memopt.cast %i : (tensor<3xi64>) -> tensor<3xi8>
  %u = memopt.constant dense<[255, 1]> : tensor<2xui8>
  %uf = memopt.cast %u : (tensor<2xui8>) -> tensor<2xf32>
  return %i, %h, %b, %n, %uf : tensor<3xi64>, tensor<3xf16>, tensor<3xi1>, tensor<3xi8>, tensor<2xf32>
}

// -----

// CHECK-LABEL: func.func @constant_of_shape_and_range
// CHECK-DAG: memopt.constant dense<7> : tensor<2x3xi32>
// CHECK-DAG: memopt.constant dense<0.000000e+00> : tensor<4xf32>
// CHECK-DAG: memopt.constant dense<[5, 3, 1]> : tensor<3xi64>
// CHECK-DAG: memopt.constant dense<[0.000000e+00, 5.000000e-01, 1.000000e+00]> : tensor<3xf32>
// CHECK-NOT: memopt.range
// CHECK-NOT: memopt.constant_of_shape
func.func @constant_of_shape_and_range(%x: tensor<2x3xf32>) -> (tensor<2x3xi32>, tensor<4xf32>, tensor<3xi64>, tensor<3xf32>) {
  %s = memopt.shape %x : (tensor<2x3xf32>) -> tensor<2xi64>
  %c = memopt.constant_of_shape %s {value = dense<7> : tensor<1xi32>} : (tensor<2xi64>) -> tensor<2x3xi32>
  %s1 = memopt.constant dense<4> : tensor<1xi64>
  %z = memopt.constant_of_shape %s1 : (tensor<1xi64>) -> tensor<4xf32>
  %start = memopt.constant dense<5> : tensor<i64>
  %limit = memopt.constant dense<0> : tensor<i64>
  %delta = memopt.constant dense<-2> : tensor<i64>
  %r = memopt.range %start, %limit, %delta : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<3xi64>
  %fs = memopt.constant dense<0.0> : tensor<f32>
  %fl = memopt.constant dense<1.25> : tensor<f32>
  %fd = memopt.constant dense<0.5> : tensor<f32>
  %fr = memopt.range %fs, %fl, %fd : (tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<3xf32>
  return %c, %z, %r, %fr : tensor<2x3xi32>, tensor<4xf32>, tensor<3xi64>, tensor<3xf32>
}

// -----

// CHECK-LABEL: func.func @slice_gather_squeeze
// CHECK-DAG: %[[REV:.*]] = memopt.constant dense<[6, 4, 2]> : tensor<3xi64>
// CHECK-DAG: %[[G:.*]] = memopt.constant dense<{{\[\[}}3, 1], [6, 4]]> : tensor<2x2xi64>
// CHECK-DAG: %[[SQ:.*]] = memopt.constant dense<[1, 2, 3]> : tensor<3xi64>
// CHECK-DAG: %[[FL:.*]] = memopt.constant dense<{{\[\[}}1, 2, 3, 4, 5, 6]]> : tensor<1x6xi64>
// CHECK: return %[[REV]], %[[G]], %[[SQ]], %[[FL]]
func.func @slice_gather_squeeze() -> (tensor<3xi64>, tensor<2x2xi64>, tensor<3xi64>, tensor<1x6xi64>) {
  %v = memopt.constant dense<[1, 2, 3, 4, 5, 6]> : tensor<6xi64>
  // Negative step from the back, end below the front: 6, 4, 2.
  %rev = memopt.slice %v {starts = array<i64: -1>, ends = array<i64: -9223372036854775807>, axes = array<i64: 0>, steps = array<i64: -2>} : (tensor<6xi64>) -> tensor<3xi64>
  %m = memopt.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
  %idx = memopt.constant dense<[-1, 0]> : tensor<2xi64>
  %g = memopt.gather %m, %idx {axis = 1 : i64} : (tensor<2x3xi64>, tensor<2xi64>) -> tensor<2x2xi64>
  %g0 = memopt.constant dense<[[1, 2, 3]]> : tensor<1x3xi64>
  %sq = memopt.squeeze %g0 {axes = array<i64: 0>} : (tensor<1x3xi64>) -> tensor<3xi64>
  %fl = memopt.flatten %m {axis = 0 : i64} : (tensor<2x3xi64>) -> tensor<1x6xi64>
  return %rev, %g, %sq, %fl : tensor<3xi64>, tensor<2x2xi64>, tensor<3xi64>, tensor<1x6xi64>
}

// -----

// CHECK-LABEL: func.func @transpose_expand_neg_concat
// CHECK-DAG: %[[T:.*]] = memopt.constant dense<{{\[\[}}1, 4], [2, 5], [3, 6]]> : tensor<3x2xi64>
// CHECK-DAG: %[[E:.*]] = memopt.constant dense<{{\[\[}}1, 1], [2, 2]]> : tensor<2x2xi32>
// CHECK-DAG: %[[N:.*]] = memopt.constant dense<[-1.000000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK-DAG: %[[C:.*]] = memopt.constant dense<{{\[\[}}1, 2, 3, 7], [4, 5, 6, 8]]> : tensor<2x4xi64>
// CHECK: return %[[T]], %[[E]], %[[N]], %[[C]]
func.func @transpose_expand_neg_concat() -> (tensor<3x2xi64>, tensor<2x2xi32>, tensor<2xf32>, tensor<2x4xi64>) {
  %m = memopt.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
  %t = memopt.transpose %m : (tensor<2x3xi64>) -> tensor<3x2xi64>
  %c = memopt.constant dense<[[1], [2]]> : tensor<2x1xi32>
  %e = memopt.expand %c : (tensor<2x1xi32>) -> tensor<2x2xi32>
  %f = memopt.constant dense<[1.0, -2.0]> : tensor<2xf32>
  %n = memopt.neg %f : tensor<2xf32>
  %col = memopt.constant dense<[[7], [8]]> : tensor<2x1xi64>
  %cat = memopt.concat %m, %col {axis = 1 : i64} : (tensor<2x3xi64>, tensor<2x1xi64>) -> tensor<2x4xi64>
  return %t, %e, %n, %cat : tensor<3x2xi64>, tensor<2x2xi32>, tensor<2xf32>, tensor<2x4xi64>
}

// -----

// Row-major order is kept by reshape; a splat expands to a splat.
// CHECK-LABEL: func.func @reshape_and_splat_expand
// CHECK-DAG: %[[R:.*]] = memopt.constant dense<{{\[\[}}1, 2], [3, 4], [5, 6]]> : tensor<3x2xi64>
// CHECK-DAG: %[[E:.*]] = memopt.constant dense<5.000000e-01> : tensor<2x3xf32>
// CHECK-DAG: %[[U:.*]] = memopt.constant dense<{{\[\[}}[1, 2, 3]], {{\[\[}}4, 5, 6]]]> : tensor<2x1x3xi64>
// CHECK: return %[[R]], %[[E]], %[[U]]
func.func @reshape_and_splat_expand() -> (tensor<3x2xi64>, tensor<2x3xf32>, tensor<2x1x3xi64>) {
  %m = memopt.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
  %r = memopt.reshape %m : (tensor<2x3xi64>) -> tensor<3x2xi64>
  %h = memopt.constant dense<0.5> : tensor<1xf32>
  %e = memopt.expand %h : (tensor<1xf32>) -> tensor<2x3xf32>
  %u = memopt.unsqueeze %m {axes = array<i64: 1>} : (tensor<2x3xi64>) -> tensor<2x1x3xi64>
  return %r, %e, %u : tensor<3x2xi64>, tensor<2x3xf32>, tensor<2x1x3xi64>
}

// -----

// Trivial identities fold to the operand without constants.
// CHECK-LABEL: func.func @identities
// CHECK-NEXT: return %arg0, %arg0, %arg0, %arg0 :
func.func @identities(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {
  %0 = memopt.identity %x : tensor<2x3xf32>
  %1 = memopt.reshape %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = memopt.transpose %x {perm = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %3 = memopt.expand %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0, %1, %2, %3 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// Weights (dense_resource) never fold, and neither do non-constant operands.
// CHECK-LABEL: func.func @no_fold_of_weights
// CHECK: memopt.transpose
// CHECK: memopt.neg
func.func @no_fold_of_weights(%x: tensor<2xf32>) -> (tensor<2x1xf32>, tensor<2xf32>) {
  %w = memopt.constant dense_resource<weights> : tensor<1x2xf32>
  %t = memopt.transpose %w : (tensor<1x2xf32>) -> tensor<2x1xf32>
  %n = memopt.neg %x : tensor<2xf32>
  return %t, %n : tensor<2x1xf32>, tensor<2xf32>
}

{-#
  dialect_resources: {
    builtin: {
      weights: "0x040000000000803F00000040"
    }
  }
#-}

// -----

// A folded constant lives for the whole program, so results above 65536
// elements are left to run time even when every operand is a small splat.
// CHECK-LABEL: func.func @no_fold_of_large_results
// CHECK: memopt.expand
// CHECK: memopt.add
// CHECK: memopt.constant_of_shape
func.func @no_fold_of_large_results(%s: tensor<2xi64>) -> (tensor<512x512xf32>, tensor<512x512xf32>, tensor<512x512xf32>) {
  %one = memopt.constant dense<1.0> : tensor<1xf32>
  %e = memopt.expand %one : (tensor<1xf32>) -> tensor<512x512xf32>
  %big = memopt.constant dense<2.0> : tensor<1x512xf32>
  %col = memopt.constant dense<3.0> : tensor<512x1xf32>
  %a = memopt.add %big, %col : (tensor<1x512xf32>, tensor<512x1xf32>) -> tensor<512x512xf32>
  %shape = memopt.constant dense<512> : tensor<2xi64>
  %z = memopt.constant_of_shape %shape : (tensor<2xi64>) -> tensor<512x512xf32>
  return %e, %a, %z : tensor<512x512xf32>, tensor<512x512xf32>, tensor<512x512xf32>
}

// -----

// Round trips through a wider type fold away; lossy ones (f32 -> f16 -> f32,
// f16 -> bf16 -> f16) stay. Views under a reshape are skipped.
// CHECK-LABEL: func.func @cast_round_trips_and_view_chains
// CHECK: %[[LOSSY:.*]] = memopt.cast %arg1 : (tensor<4xf32>) -> tensor<4xf16>
// CHECK: %[[BACK:.*]] = memopt.cast %[[LOSSY]] : (tensor<4xf16>) -> tensor<4xf32>
// CHECK: %[[BF:.*]] = memopt.cast %arg0 : (tensor<4xf16>) -> tensor<4xbf16>
// CHECK: %[[BF_BACK:.*]] = memopt.cast %[[BF]] : (tensor<4xbf16>) -> tensor<4xf16>
// CHECK: %[[R:.*]] = memopt.reshape %arg2 : (tensor<2x1x3xf32>) -> tensor<3x2xf32>
// CHECK: return %arg0, %[[BACK]], %[[BF_BACK]], %arg3, %[[R]]
func.func @cast_round_trips_and_view_chains(%h: tensor<4xf16>, %f: tensor<4xf32>, %x: tensor<2x1x3xf32>, %i: tensor<4xi32>)
    -> (tensor<4xf16>, tensor<4xf32>, tensor<4xf16>, tensor<4xi32>, tensor<3x2xf32>) {
  %up = memopt.cast %h : (tensor<4xf16>) -> tensor<4xf32>
  %down = memopt.cast %up : (tensor<4xf32>) -> tensor<4xf16>
  %lossy = memopt.cast %f : (tensor<4xf32>) -> tensor<4xf16>
  %back = memopt.cast %lossy : (tensor<4xf16>) -> tensor<4xf32>
  %bf = memopt.cast %h : (tensor<4xf16>) -> tensor<4xbf16>
  %bfback = memopt.cast %bf : (tensor<4xbf16>) -> tensor<4xf16>
  %wide = memopt.cast %i : (tensor<4xi32>) -> tensor<4xi64>
  %narrow = memopt.cast %wide : (tensor<4xi64>) -> tensor<4xi32>
  %sq = memopt.squeeze %x {axes = array<i64: 1>} : (tensor<2x1x3xf32>) -> tensor<2x3xf32>
  %fl = memopt.flatten %sq {axis = 0 : i64} : (tensor<2x3xf32>) -> tensor<1x6xf32>
  %r = memopt.reshape %fl : (tensor<1x6xf32>) -> tensor<3x2xf32>
  return %down, %back, %bfback, %narrow, %r : tensor<4xf16>, tensor<4xf32>, tensor<4xf16>, tensor<4xi32>, tensor<3x2xf32>
}

// -----

// ONNX Mod: fmod = 0 floors (sign of the divisor), fmod = 1 truncates (sign
// of the dividend), with broadcasting; floats use C fmod. swin_t's
// TorchScript export computes its window shifts this way.
// CHECK-LABEL: func.func @mod_fold
// CHECK-DAG: %[[FLOOR:.*]] = memopt.constant dense<{{\[\[}}1, 2, -2, -1], [0, 0, 0, 0]]> : tensor<2x4xi64>
// CHECK-DAG: %[[TRUNC:.*]] = memopt.constant dense<[1, -1, 1, -1]> : tensor<4xi32>
// CHECK-DAG: %[[F:.*]] = memopt.constant dense<[1.500000e+00, -1.500000e+00, 1.500000e+00]> : tensor<3xf32>
// CHECK-DAG: %[[U:.*]] = memopt.constant dense<[2, 4]> : tensor<2xui8>
// CHECK: return %[[FLOOR]], %[[TRUNC]], %[[F]], %[[U]]
func.func @mod_fold() -> (tensor<2x4xi64>, tensor<4xi32>, tensor<3xf32>, tensor<2xui8>) {
  %a = memopt.constant dense<[[7, -7, 7, -7], [6, -6, 6, -6]]> : tensor<2x4xi64>
  %b = memopt.constant dense<[3, 3, -3, -3]> : tensor<4xi64>
  %floor = memopt.mod %a, %b : (tensor<2x4xi64>, tensor<4xi64>) -> tensor<2x4xi64>
  %c = memopt.constant dense<[7, -7, 7, -7]> : tensor<4xi32>
  %d = memopt.constant dense<[3, 3, -3, -3]> : tensor<4xi32>
  %trunc = memopt.mod %c, %d {fmod = 1 : i64} : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  %e = memopt.constant dense<[5.5, -5.5, 5.5]> : tensor<3xf32>
  %g = memopt.constant dense<[2.0, 2.0, -2.0]> : tensor<3xf32>
  %f = memopt.mod %e, %g {fmod = 1 : i64} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %h = memopt.constant dense<[200, 250]> : tensor<2xui8>
  %k = memopt.constant dense<[3, 6]> : tensor<2xui8>
  %u = memopt.mod %h, %k : (tensor<2xui8>, tensor<2xui8>) -> tensor<2xui8>
  return %floor, %trunc, %f, %u : tensor<2x4xi64>, tensor<4xi32>, tensor<3xf32>, tensor<2xui8>
}

// -----

// A zero divisor is left to run time.
// CHECK-LABEL: func.func @mod_by_zero
// CHECK: memopt.mod
func.func @mod_by_zero() -> tensor<2xi64> {
  %a = memopt.constant dense<[7, 8]> : tensor<2xi64>
  %b = memopt.constant dense<[3, 0]> : tensor<2xi64>
  %m = memopt.mod %a, %b : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
  return %m : tensor<2xi64>
}

// -----

// ScatterND on constants: row slices (k = 1, negative index from the back),
// single elements (k = 2), the reductions with a repeated index (applied in
// order), and "none" with a repeated index (the last update wins).
// CHECK-LABEL: func.func @scatter_nd_fold
// CHECK-DAG: %[[ROWS:.*]] = memopt.constant dense<{{\[\[}}1.000000e+00, 2.000000e+00], [0.000000e+00, 0.000000e+00], [3.000000e+00, 4.000000e+00]]> : tensor<3x2xf32>
// CHECK-DAG: %[[ELEMS:.*]] = memopt.constant dense<{{\[\[}}0, 5], [6, 0]]> : tensor<2x2xi64>
// CHECK-DAG: %[[ADD:.*]] = memopt.constant dense<[10, 12, 10, 10]> : tensor<4xi32>
// CHECK-DAG: %[[MUL:.*]] = memopt.constant dense<[10, -240, 10, 10]> : tensor<4xi32>
// CHECK-DAG: %[[MAX:.*]] = memopt.constant dense<[10, 11, 10, 10]> : tensor<4xi32>
// CHECK-DAG: %[[MIN:.*]] = memopt.constant dense<[10, 1, 10, 10]> : tensor<4xi32>
// CHECK-DAG: %[[LAST:.*]] = memopt.constant dense<[0, 2, 0, 0]> : tensor<4xi32>
// CHECK-NOT: memopt.scatter_nd
// CHECK: return %[[ROWS]], %[[ELEMS]], %[[ADD]], %[[MUL]], %[[MAX]], %[[MIN]], %[[LAST]]
func.func @scatter_nd_fold() -> (tensor<3x2xf32>, tensor<2x2xi64>, tensor<4xi32>, tensor<4xi32>, tensor<4xi32>, tensor<4xi32>, tensor<4xi32>) {
  %zeros = memopt.constant dense<0.0> : tensor<3x2xf32>
  %rows_at = memopt.constant dense<[[0], [-1]]> : tensor<2x1xi64>
  %rows = memopt.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %0 = memopt.scatter_nd %zeros, %rows_at, %rows : (tensor<3x2xf32>, tensor<2x1xi64>, tensor<2x2xf32>) -> tensor<3x2xf32>
  %izeros = memopt.constant dense<0> : tensor<2x2xi64>
  %elems_at = memopt.constant dense<[[0, 1], [1, 0]]> : tensor<2x2xi64>
  %elems = memopt.constant dense<[5, 6]> : tensor<2xi64>
  %1 = memopt.scatter_nd %izeros, %elems_at, %elems : (tensor<2x2xi64>, tensor<2x2xi64>, tensor<2xi64>) -> tensor<2x2xi64>
  %tens = memopt.constant dense<10> : tensor<4xi32>
  %twice = memopt.constant dense<[[1], [1]]> : tensor<2x1xi64>
  %ups = memopt.constant dense<[-4, 6]> : tensor<2xi32>
  %ups2 = memopt.constant dense<[1, 11]> : tensor<2xi32>
  %ups3 = memopt.constant dense<[1, 2]> : tensor<2xi32>
  %2 = memopt.scatter_nd %tens, %twice, %ups {reduction = "add"} : (tensor<4xi32>, tensor<2x1xi64>, tensor<2xi32>) -> tensor<4xi32>
  %3 = memopt.scatter_nd %tens, %twice, %ups {reduction = "mul"} : (tensor<4xi32>, tensor<2x1xi64>, tensor<2xi32>) -> tensor<4xi32>
  %4 = memopt.scatter_nd %tens, %twice, %ups2 {reduction = "max"} : (tensor<4xi32>, tensor<2x1xi64>, tensor<2xi32>) -> tensor<4xi32>
  %5 = memopt.scatter_nd %tens, %twice, %ups2 {reduction = "min"} : (tensor<4xi32>, tensor<2x1xi64>, tensor<2xi32>) -> tensor<4xi32>
  %izero4 = memopt.constant dense<0> : tensor<4xi32>
  %6 = memopt.scatter_nd %izero4, %twice, %ups3 : (tensor<4xi32>, tensor<2x1xi64>, tensor<2xi32>) -> tensor<4xi32>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<3x2xf32>, tensor<2x2xi64>, tensor<4xi32>, tensor<4xi32>, tensor<4xi32>, tensor<4xi32>, tensor<4xi32>
}

// -----

// Float reductions, and no updates at all (the result is `data`, even when
// it is not a constant).
// CHECK-LABEL: func.func @scatter_nd_fold_float
// CHECK-DAG: %[[ADD:.*]] = memopt.constant dense<[1.000000e+00, 3.500000e+00]> : tensor<2xf32>
// CHECK-DAG: %[[MAX:.*]] = memopt.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK: return %[[ADD]], %[[MAX]], %arg0
func.func @scatter_nd_fold_float(%x: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) {
  %d = memopt.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %i = memopt.constant dense<[[1], [1]]> : tensor<2x1xi64>
  %u = memopt.constant dense<[0.5, 1.0]> : tensor<2xf32>
  %0 = memopt.scatter_nd %d, %i, %u {reduction = "add"} : (tensor<2xf32>, tensor<2x1xi64>, tensor<2xf32>) -> tensor<2xf32>
  %1 = memopt.scatter_nd %d, %i, %u {reduction = "max"} : (tensor<2xf32>, tensor<2x1xi64>, tensor<2xf32>) -> tensor<2xf32>
  %none = memopt.constant dense<0> : tensor<0x1xi64>
  %nothing = memopt.constant dense<0.0> : tensor<0xf32>
  %2 = memopt.scatter_nd %x, %none, %nothing : (tensor<2xf32>, tensor<0x1xi64>, tensor<0xf32>) -> tensor<2xf32>
  return %0, %1, %2 : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
}

// -----

// Not folded: an index out of range (left to the runtime's error), and an
// operand that is not a constant.
// CHECK-LABEL: func.func @scatter_nd_no_fold
// CHECK-COUNT-2: memopt.scatter_nd
func.func @scatter_nd_no_fold(%x: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
  %d = memopt.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %bad = memopt.constant dense<[[2]]> : tensor<1x1xi64>
  %u = memopt.constant dense<[5.0]> : tensor<1xf32>
  %0 = memopt.scatter_nd %d, %bad, %u : (tensor<2xf32>, tensor<1x1xi64>, tensor<1xf32>) -> tensor<2xf32>
  %ok = memopt.constant dense<[[1]]> : tensor<1x1xi64>
  %1 = memopt.scatter_nd %x, %ok, %u : (tensor<2xf32>, tensor<1x1xi64>, tensor<1xf32>) -> tensor<2xf32>
  return %0, %1 : tensor<2xf32>, tensor<2xf32>
}

// -----

// Position ids from a constant padding mask (HF's `cumsum(mask, -1) * mask`
// and the exporters' `cumsum - 1`) collapse to one constant at import.
// CHECK-LABEL: func.func @cum_sum_position_ids
// CHECK-NEXT: %[[IDS:.*]] = memopt.constant dense<{{\[}}[0, 1, 2, -1], [-1, 0, 1, 2]]> : tensor<2x4xi64>
// CHECK-NEXT: return %[[IDS]]
func.func @cum_sum_position_ids() -> tensor<2x4xi64> {
  %mask = memopt.constant dense<[[1, 1, 1, 0], [0, 1, 1, 1]]> : tensor<2x4xi64>
  %sum = memopt.cum_sum %mask {axis = 1 : i64} : (tensor<2x4xi64>) -> tensor<2x4xi64>
  %masked = memopt.mul %sum, %mask : (tensor<2x4xi64>, tensor<2x4xi64>) -> tensor<2x4xi64>
  %one = memopt.constant dense<1> : tensor<i64>
  %ids = memopt.sub %masked, %one : (tensor<2x4xi64>, tensor<i64>) -> tensor<2x4xi64>
  return %ids : tensor<2x4xi64>
}

// -----

// The middle axis of a 3-D tensor, exclusive and reverse; a splat; i32 sums
// wrap in 32 bits; f16 results round once per element.
// CHECK-LABEL: func.func @cum_sum_fold_flags
// CHECK-DAG: memopt.constant dense<{{\[}}{{\[}}[5, 7], [3, 4], [0, 0]], {{\[}}[11, 13], [6, 7], [0, 0]]]> : tensor<2x3x2xi64>
// CHECK-DAG: memopt.constant dense<[2.000000e+00, 4.000000e+00, 6.000000e+00]> : tensor<3xf32>
// CHECK-DAG: memopt.constant dense<[2147483647, -2147483648]> : tensor<2xi32>
// CHECK-DAG: memopt.constant dense<[0.000000e+00, 2.048000e+03, 2.048000e+03]> : tensor<3xf16>
// CHECK-NOT: memopt.cum_sum
func.func @cum_sum_fold_flags() -> (tensor<2x3x2xi64>, tensor<3xf32>, tensor<2xi32>, tensor<3xf16>) {
  %x = memopt.constant dense<[[[1, 2], [2, 3], [3, 4]], [[4, 5], [5, 6], [6, 7]]]> : tensor<2x3x2xi64>
  %0 = memopt.cum_sum %x {axis = 1 : i64, exclusive = 1 : i64, reverse = 1 : i64} : (tensor<2x3x2xi64>) -> tensor<2x3x2xi64>
  %two = memopt.constant dense<2.0> : tensor<3xf32>
  %1 = memopt.cum_sum %two {axis = 0 : i64} : (tensor<3xf32>) -> tensor<3xf32>
  %big = memopt.constant dense<[2147483647, 1]> : tensor<2xi32>
  %2 = memopt.cum_sum %big {axis = 0 : i64} : (tensor<2xi32>) -> tensor<2xi32>
  %h = memopt.constant dense<[2048.0, 1.0, 1.0]> : tensor<3xf16>
  %3 = memopt.cum_sum %h {axis = 0 : i64, exclusive = 1 : i64} : (tensor<3xf16>) -> tensor<3xf16>
  return %0, %1, %2, %3 : tensor<2x3x2xi64>, tensor<3xf32>, tensor<2xi32>, tensor<3xf16>
}

// -----

// A running sum of an argument stays.
// CHECK-LABEL: func.func @cum_sum_no_fold
// CHECK: memopt.cum_sum
func.func @cum_sum_no_fold(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = memopt.cum_sum %x {axis = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
