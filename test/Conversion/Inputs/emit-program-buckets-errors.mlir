// A wait before the collectives of its bucket (emit-program-buckets.mlir).
func.func @main(%x: tensor<8xf32> {memopt.name = "x"}) -> (tensor<f32> {memopt.name = "loss"})
    attributes {memopt.arena_size = 256 : i64, memopt.weights_size = 256 : i64, memopt.data_parallel = {ranks = 2 : i64, shard = "none"}} {
  %a = memopt.variable "a" {initial_value = dense<0.5> : tensor<8xf32>, role = "parameter", memopt.weight_offset = 0 : i64} : tensor<8xf32>
  %lr = memopt.variable "memopt.learning_rate" {initial_value = dense<0.1> : tensor<f32>, role = "learning_rate", memopt.weight_offset = 192 : i64} : tensor<f32>
  %ga = memopt.relu %x {memopt.offsets = array<i64: 0>} : tensor<8xf32> loc("grad_a")
  memopt.wait_collectives %ga {bucket = 0 : i64, memopt.offsets = array<i64>} : tensor<8xf32> loc("early_wait")
  %ra = memopt.all_reduce %ga {bucket = 0 : i64, memopt.in_place = 0 : i64, memopt.offsets = array<i64: 0>} : (tensor<8xf32>) -> tensor<8xf32> loc("reduce_a")
  memopt.sgd_update %a, %ra, lr %lr {memopt.offsets = array<i64>} : tensor<8xf32>, tensor<8xf32>, tensor<f32> loc("update_a")
  %l = memopt.reduce_sum %x {axes = array<i64: 0>, keepdims = 0 : i64, memopt.offsets = array<i64: -1>} : (tensor<8xf32>) -> tensor<f32> loc("loss_sum")
  return %l : tensor<f32>
}
