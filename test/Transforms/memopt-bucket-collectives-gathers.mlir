// memopt-bucket-collectives on a ZeRO-3 step: the parameter gathers grouped
// per layer (a cap in MiB, in the schedule's order) and each group issued one
// group ahead, waited for right before its first reader.
// RUN: memopt-opt %s --split-input-file --verify-diagnostics --memopt-bucket-collectives="bucket-mib=0 gather-mib=0.0009765625" | FileCheck %s
// RUN: memopt-opt %s --split-input-file --memopt-bucket-collectives="bucket-mib=0 gather-mib=0.001953125" | FileCheck %s --check-prefix=PAIRS
// RUN: memopt-opt %s --split-input-file --memopt-bucket-collectives="bucket-mib=0 gather-mib=0.0009765625 report=true" -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: memopt-opt %s --split-input-file --memopt-bucket-collectives="first-bucket-mib=0.0009765625 bucket-mib=0.0009765625 gather-mib=0.0009765625" | FileCheck %s --check-prefix=BUCKETS
// RUN: memopt-opt %s --split-input-file --memopt-bucket-collectives="bucket-mib=0 gather-mib=0" | FileCheck %s --check-prefix=OFF
// RUN: sed -e 's/"w0"/"h.0.a"/' -e 's/"w1"/"h.0.b"/' -e 's/"w2"/"h.1.a"/' %s | memopt-opt --split-input-file --memopt-bucket-collectives="bucket-mib=0 gather-mib=1" | FileCheck %s --check-prefix=PAIRS
// RUN: memopt-opt %s --split-input-file --memopt-bucket-collectives="bucket-mib=0 gather-mib=1" | FileCheck %s --check-prefix=ONE
// RUN: sed -e 's/"w0"/"h.0.a"/' -e 's/"w1"/"val_8"/' -e 's/"w2"/"h.1.a"/' %s | memopt-opt --split-input-file --memopt-bucket-collectives="bucket-mib=0 gather-mib=1" | FileCheck %s --check-prefix=UNNAMED

// Three layers of 1 KiB parameters: the forward gathers w0, w1, w2, the
// backward w2 and w1 again (w0's gradient does not read w0). With a 1 KiB cap
// every gather is a group of its own: group 0 is issued where it was; group
// k right after group k - 1's wait, before the first op that reads group
// k - 1, so layer k's parameter travels while layer k - 1 computes; in the
// backward the same in the reverse order. w2's backward gather would be
// issued before the forward's last layer, which still reads w2's forward
// gather: the backward reads that one instead (the same values, alive over
// the same span), and w1's backward gather is issued before w2's backward.
// CHECK-LABEL: func.func @layers
// CHECK: %[[W0:.*]] = memopt.variable "w0"
// CHECK: %[[W1:.*]] = memopt.variable "w1"
// CHECK: %[[W2:.*]] = memopt.variable "w2"
// CHECK: %[[F0:.*]] = memopt.gather_parameter %[[W0]] {bucket = 0 : i64, ranks = 2 : i64}
// CHECK-NEXT: memopt.wait_collectives %[[W0]], %[[F0]] {bucket = 0 : i64}
// CHECK-NEXT: %[[F1:.*]] = memopt.gather_parameter %[[W1]] {bucket = 1 : i64, ranks = 2 : i64}
// CHECK-NEXT: %[[Y0:.*]] = memopt.mul %arg0, %[[F0]]
// CHECK-NEXT: %[[A0:.*]] = memopt.relu %[[Y0]]
// CHECK-NEXT: memopt.wait_collectives %[[W1]], %[[F1]] {bucket = 1 : i64}
// CHECK-NEXT: %[[F2:.*]] = memopt.gather_parameter %[[W2]] {bucket = 2 : i64, ranks = 2 : i64}
// CHECK-NEXT: %[[Y1:.*]] = memopt.mul %[[A0]], %[[F1]]
// CHECK-NEXT: %[[A1:.*]] = memopt.relu %[[Y1]]
// CHECK-NEXT: memopt.wait_collectives %[[W2]], %[[F2]] {bucket = 2 : i64}
// CHECK-NEXT: %[[Y2:.*]] = memopt.mul %[[A1]], %[[F2]]
// CHECK-NEXT: %[[B1:.*]] = memopt.gather_parameter %[[W1]] {bucket = 3 : i64, ranks = 2 : i64}
// CHECK-NEXT: %[[G2:.*]] = memopt.mul %[[Y2]], %[[F2]]
// CHECK-NEXT: %[[S2:.*]] = memopt.reduce_scatter %[[G2]]
// CHECK-NEXT: memopt.sgd_update %[[W2]], %[[S2]]
// CHECK-NEXT: memopt.wait_collectives %[[W1]], %[[B1]] {bucket = 3 : i64}
// CHECK-NEXT: %[[G1:.*]] = memopt.mul %[[G2]], %[[B1]]
// CHECK-NEXT: %[[S1:.*]] = memopt.reduce_scatter %[[G1]]
// CHECK-NEXT: memopt.sgd_update %[[W1]], %[[S1]]
// CHECK-NOT: memopt.gather_parameter
// CHECK: return %[[Y2]]
// Without a layer in the names (w0, w1, w2) a 1 MiB cap makes the three
// forward gathers one group.
// ONE-LABEL: func.func @layers
// ONE: memopt.gather_parameter %{{.*}} {bucket = 0 : i64, ranks = 2 : i64}
// ONE-NEXT: memopt.gather_parameter %{{.*}} {bucket = 0 : i64, ranks = 2 : i64}
// ONE-NEXT: memopt.gather_parameter %{{.*}} {bucket = 0 : i64, ranks = 2 : i64}
// Named by layer (h.0.a, h.0.b, h.1.a), the same 1 MiB cap gives one group
// per layer, as FSDP2 wrapping each block does: the same groups as the
// 2 KiB cap below (PAIRS). A name without a layer (a dynamo export's val_8
// for a transposed weight) joins the group it comes in: h.0.a, val_8 | h.1.a
// and, in the backward, val_8's gather with h.1.a's group, where it reads
// the forward's still alive gather instead.
// UNNAMED-LABEL: func.func @layers
// UNNAMED: memopt.gather_parameter %{{.*}} {bucket = 0 : i64, ranks = 2 : i64}
// UNNAMED-NEXT: memopt.gather_parameter %{{.*}} {bucket = 0 : i64, ranks = 2 : i64}
// UNNAMED-NEXT: memopt.wait_collectives
// UNNAMED-NEXT: memopt.gather_parameter %{{.*}} {bucket = 1 : i64, ranks = 2 : i64}
// UNNAMED-NOT: memopt.gather_parameter
// UNNAMED: return
// A 2 KiB cap: groups {w0, w1}, {w2} (w2's backward gather, in the same
// group, reads the forward one), {w1's backward gather}; a group's gathers
// are contiguous (one NCCL group) and its wait comes before the first op
// that reads any of them.
// PAIRS-LABEL: func.func @layers
// PAIRS: %[[F0:.*]] = memopt.gather_parameter %{{.*}} {bucket = 0 : i64, ranks = 2 : i64}
// PAIRS-NEXT: %[[F1:.*]] = memopt.gather_parameter %{{.*}} {bucket = 0 : i64, ranks = 2 : i64}
// PAIRS-NEXT: memopt.wait_collectives %{{.*}}, %{{.*}}, %[[F0]], %[[F1]] {bucket = 0 : i64}
// PAIRS-NEXT: %[[F2:.*]] = memopt.gather_parameter %{{.*}} {bucket = 1 : i64, ranks = 2 : i64}
// PAIRS-NEXT: memopt.mul %arg0, %[[F0]]
// PAIRS-NEXT: memopt.relu
// PAIRS-NEXT: memopt.mul %{{.*}}, %[[F1]]
// PAIRS-NEXT: memopt.relu
// PAIRS-NEXT: memopt.wait_collectives %{{.*}}, %[[F2]] {bucket = 1 : i64}
// PAIRS-NEXT: %[[B1:.*]] = memopt.gather_parameter %{{.*}} {bucket = 2 : i64, ranks = 2 : i64}
// PAIRS-NEXT: memopt.mul %{{.*}}, %[[F2]]
// PAIRS-NEXT: memopt.mul %{{.*}}, %[[F2]]
// PAIRS: memopt.wait_collectives %{{.*}}, %[[B1]] {bucket = 2 : i64}
// PAIRS-NEXT: memopt.mul %{{.*}}, %[[B1]]
// REPORT: memopt-bucket-collectives: 4 gather groups prefetched one ahead: 1 x 1024 bytes, 1 x 1024 bytes, 1 x 1024 bytes, 1 x 1024 bytes; 1 gathers read an earlier gather still alive
// With gradient buckets too, the gather groups are numbered after them.
// BUCKETS-LABEL: func.func @layers
// BUCKETS-DAG: memopt.reduce_scatter {{.*}}bucket = 0 : i64
// BUCKETS-DAG: memopt.reduce_scatter {{.*}}bucket = 1 : i64
// BUCKETS-DAG: memopt.reduce_scatter {{.*}}bucket = 2 : i64
// BUCKETS-DAG: memopt.gather_parameter {{.*}}bucket = 3 : i64
// BUCKETS-DAG: memopt.gather_parameter {{.*}}bucket = 6 : i64
// BUCKETS-DAG: memopt.wait_collectives {{.*}}bucket = 6 : i64
// OFF-LABEL: func.func @layers
// OFF-NOT: bucket
// OFF-NOT: memopt.wait_collectives
func.func @layers(%x: tensor<16x16xf32>) -> tensor<16x16xf32> attributes {memopt.data_parallel = {ranks = 2 : i64, shard = "parameters"}} {
  %w0 = memopt.variable "w0" {initial_value = dense<0.5> : tensor<16x16xf32>, memopt.shards = 2 : i64, role = "parameter"} : tensor<128xf32>
  %w1 = memopt.variable "w1" {initial_value = dense<0.25> : tensor<16x16xf32>, memopt.shards = 2 : i64, role = "parameter"} : tensor<128xf32>
  %w2 = memopt.variable "w2" {initial_value = dense<0.125> : tensor<16x16xf32>, memopt.shards = 2 : i64, role = "parameter"} : tensor<128xf32>
  %lr = memopt.variable "memopt.learning_rate" {initial_value = dense<0.1> : tensor<f32>, role = "learning_rate"} : tensor<f32>
  %f0 = memopt.gather_parameter %w0 {ranks = 2 : i64} : (tensor<128xf32>) -> tensor<16x16xf32>
  %y0 = memopt.mul %x, %f0 : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
  %a0 = memopt.relu %y0 : tensor<16x16xf32>
  %f1 = memopt.gather_parameter %w1 {ranks = 2 : i64} : (tensor<128xf32>) -> tensor<16x16xf32>
  %y1 = memopt.mul %a0, %f1 : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
  %a1 = memopt.relu %y1 : tensor<16x16xf32>
  %f2 = memopt.gather_parameter %w2 {ranks = 2 : i64} : (tensor<128xf32>) -> tensor<16x16xf32>
  %y2 = memopt.mul %a1, %f2 : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
  %b2 = memopt.gather_parameter %w2 {ranks = 2 : i64} : (tensor<128xf32>) -> tensor<16x16xf32>
  %g2 = memopt.mul %y2, %b2 : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
  %s2 = memopt.reduce_scatter %g2 {ranks = 2 : i64} : (tensor<16x16xf32>) -> tensor<128xf32>
  memopt.sgd_update %w2, %s2, lr %lr : tensor<128xf32>, tensor<128xf32>, tensor<f32>
  %b1 = memopt.gather_parameter %w1 {ranks = 2 : i64} : (tensor<128xf32>) -> tensor<16x16xf32>
  %g1 = memopt.mul %g2, %b1 : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
  %s1 = memopt.reduce_scatter %g1 {ranks = 2 : i64} : (tensor<16x16xf32>) -> tensor<128xf32>
  memopt.sgd_update %w1, %s1, lr %lr : tensor<128xf32>, tensor<128xf32>, tensor<f32>
  %g0 = memopt.mul %g1, %x : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
  %s0 = memopt.reduce_scatter %g0 {ranks = 2 : i64} : (tensor<16x16xf32>) -> tensor<128xf32>
  memopt.sgd_update %w0, %s0, lr %lr : tensor<128xf32>, tensor<128xf32>, tensor<f32>
  return %y2 : tensor<16x16xf32>
}

// -----

// The low copy (bf16) is gathered and grouped like the f32 master, its
// bytes counted in the gathered type: a 512-byte bf16 parameter does not
// fill a 1 KiB group, the 1 KiB f32 one after it does.
// REPORT: memopt-bucket-collectives: 1 gather groups prefetched one ahead: 2 x 1536 bytes
// CHECK-LABEL: func.func @low
// CHECK: memopt.gather_parameter {{.*}}bucket = 0 : i64{{.*}} -> tensor<16x16xbf16>
// CHECK-NEXT: memopt.gather_parameter {{.*}}bucket = 0 : i64{{.*}} -> tensor<16x16xf32>
// CHECK-NEXT: memopt.wait_collectives {{.*}}bucket = 0 : i64
func.func @low(%x: tensor<16x16xbf16>, %z: tensor<16x16xf32>) -> (tensor<16x16xbf16>, tensor<16x16xf32>) attributes {memopt.data_parallel = {ranks = 2 : i64, shard = "parameters"}} {
  %w0 = memopt.variable "w0" {initial_value = dense<0.5> : tensor<16x16xf32>, memopt.shards = 2 : i64, role = "parameter"} : tensor<128xf32>
  %w1 = memopt.variable "w1" {initial_value = dense<0.25> : tensor<16x16xf32>, memopt.shards = 2 : i64, role = "parameter"} : tensor<128xf32>
  %f0 = memopt.gather_parameter %w0 {ranks = 2 : i64} : (tensor<128xf32>) -> tensor<16x16xbf16>
  %y0 = memopt.mul %x, %f0 : (tensor<16x16xbf16>, tensor<16x16xbf16>) -> tensor<16x16xbf16>
  %f1 = memopt.gather_parameter %w1 {ranks = 2 : i64} : (tensor<128xf32>) -> tensor<16x16xf32>
  %y1 = memopt.mul %z, %f1 : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
  return %y0, %y1 : tensor<16x16xbf16>, tensor<16x16xf32>
}

// -----

// A write of the shard between two gathers of it (an update; not what
// memopt-data-parallel makes, which gathers before the update only): the
// second gather starts a group of its own, issued after the write, and does
// not read the first one.
// CHECK-LABEL: func.func @written
// CHECK: %[[F:.*]] = memopt.gather_parameter %[[W:.*]] {bucket = 0 : i64
// CHECK: memopt.sgd_update %[[W]]
// CHECK-NEXT: %[[G:.*]] = memopt.gather_parameter %[[W]] {bucket = 1 : i64
// CHECK-NEXT: memopt.wait_collectives %[[W]], %[[G]] {bucket = 1 : i64}
// CHECK-NEXT: memopt.mul %{{.*}}, %[[G]]
// With a 2 KiB cap the two would fill one group; the write splits them.
// PAIRS-LABEL: func.func @written
// PAIRS: memopt.gather_parameter {{.*}}bucket = 0 : i64
// PAIRS: memopt.sgd_update
// PAIRS-NEXT: memopt.gather_parameter {{.*}}bucket = 1 : i64
func.func @written(%x: tensor<16x16xf32>) -> tensor<16x16xf32> attributes {memopt.data_parallel = {ranks = 2 : i64, shard = "parameters"}} {
  %w = memopt.variable "w" {initial_value = dense<0.5> : tensor<16x16xf32>, memopt.shards = 2 : i64, role = "parameter"} : tensor<128xf32>
  %lr = memopt.variable "memopt.learning_rate" {initial_value = dense<0.1> : tensor<f32>, role = "learning_rate"} : tensor<f32>
  %f = memopt.gather_parameter %w {ranks = 2 : i64} : (tensor<128xf32>) -> tensor<16x16xf32>
  %y = memopt.mul %x, %f : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
  %s = memopt.reduce_scatter %y {ranks = 2 : i64} : (tensor<16x16xf32>) -> tensor<128xf32>
  memopt.sgd_update %w, %s, lr %lr : tensor<128xf32>, tensor<128xf32>, tensor<f32>
  %g = memopt.gather_parameter %w {ranks = 2 : i64} : (tensor<128xf32>) -> tensor<16x16xf32>
  %z = memopt.mul %y, %g : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
  return %z : tensor<16x16xf32>
}
