// One instance of every op that only a training step holds, each named
// loc("op_<name>"): python/tests/test_op_coverage.py compiles it for the host
// and the CUDA backend and runs one host step (as every-op.mlir does for the
// other ops). The AdamW update accumulates over two micro-batches; the
// dropout's backward is not spelled out (memopt-autodiff would build it);
// random_uniform scales the dropout's input. The attention and its gradient
// drop out their probabilities (dropout_key, memopt's mask on the host).
// The filter gradient reaches its update in f16 under dynamic loss scaling
// (found_inf, update_loss_scale), as an f16 mixed-precision step has it.
// The fused language-model head and loss (linear_cross_entropy) trains its
// own weight. The data-parallel collectives run over one rank (no communicator: copies;
// the CUDA backend runs them over NCCL when a communicator exists).
// The *_nhwc ops are the channels-last forms memopt-layout gives a training
// step (docs/layout.md "Training").
func.func @main(%x: tensor<2x1x5x5xf32> {memopt.name = "x"}, %labels: tensor<2xi64> {memopt.name = "labels"}) -> (tensor<f32> {memopt.name = "loss"}) {
  %w = memopt.variable "w" {initial_value = dense<0.5> : tensor<2x1x3x3xf32>, role = "parameter"} : tensor<2x1x3x3xf32> loc("op_variable")
  %m = memopt.variable "w.momentum_buffer" {role = "optimizer_state"} : tensor<2x1x3x3xf32>
  %lr = memopt.variable "memopt.learning_rate" {initial_value = dense<0.1> : tensor<f32>, role = "learning_rate"} : tensor<f32>
  %step = memopt.variable "memopt.step" {initial_value = dense<0.0> : tensor<f32>, role = "step"} : tensor<f32>
  %v = memopt.variable "v" {initial_value = dense<0.25> : tensor<8x2xf32>, role = "parameter"} : tensor<8x2xf32>
  %va = memopt.variable "v.exp_avg" {role = "optimizer_state"} : tensor<8x2xf32>
  %vb = memopt.variable "v.exp_avg_sq" {role = "optimizer_state"} : tensor<8x2xf32>
  %stat = memopt.variable "s" {initial_value = dense<0.0> : tensor<2xf32>, role = "statistic"} : tensor<2xf32>
  %g = memopt.variable "g" {initial_value = dense<1.0> : tensor<2xf32>, role = "parameter"} : tensor<2xf32>
  %gb = memopt.variable "gb" {initial_value = dense<0.0> : tensor<2xf32>, role = "parameter"} : tensor<2xf32>
  %rm = memopt.variable "rm" {initial_value = dense<0.0> : tensor<2xf32>, role = "statistic"} : tensor<2xf32>
  %rv = memopt.variable "rv" {initial_value = dense<1.0> : tensor<2xf32>, role = "statistic"} : tensor<2xf32>
  %ls = memopt.variable "ls" {initial_value = dense<1.0> : tensor<8xf32>, role = "parameter"} : tensor<8xf32>
  %gm = memopt.variable "g.momentum_buffer" {role = "optimizer_state"} : tensor<2xf32>
  %gbm = memopt.variable "gb.momentum_buffer" {role = "optimizer_state"} : tensor<2xf32>
  %lsm = memopt.variable "ls.momentum_buffer" {role = "optimizer_state"} : tensor<8xf32>
  %key = memopt.variable "memopt.random_key" {role = "random_key"} : tensor<2xi64>
  %micro = memopt.variable "memopt.micro_step" {role = "micro_step"} : tensor<f32>
  %vacc = memopt.variable "v.grad" {role = "gradient_accumulator"} : tensor<8x2xf32>
  %scale = memopt.variable "memopt.loss_scale" {initial_value = dense<1024.0> : tensor<f32>, role = "loss_scale"} : tensor<f32>
  %scalestate = memopt.variable "memopt.loss_scale_state" {role = "loss_scale_state"} : tensor<2xf32>
  %one = memopt.constant dense<1.0> : tensor<f32>
  %c = memopt.conv %x, %w {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<2x1x5x5xf32>, tensor<2x1x3x3xf32>) -> tensor<2x2x3x3xf32>
  %y, %bm, %bs = memopt.batch_norm_training %c, %g, %gb {activation = "relu"} : (tensor<2x2x3x3xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<2x2x3x3xf32>, tensor<2xf32>, tensor<2xf32>) loc("op_batch_norm_training")
  memopt.batch_norm_running_update %bm, %bs to %rm, %rv {momentum = 0.9 : f32} : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32> loc("op_batch_norm_running_update")
  %p = memopt.max_pool %y {kernel_shape = array<i64: 2, 2>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<2x2x3x3xf32>) -> tensor<2x2x2x2xf32>
  %pf = memopt.reshape %p : (tensor<2x2x2x2xf32>) -> tensor<2x8xf32>
  %noise = memopt.random_uniform %key {low = 0.5 : f32, high = 1.5 : f32, stream = 2 : i64} : (tensor<2xi64>) -> tensor<2x8xf32> loc("op_random_uniform")
  %pfn = memopt.mul %pf, %noise : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %f = memopt.dropout %pfn, key %key {ratio = 0.25 : f32, stream = 1 : i64} : (tensor<2x8xf32>, tensor<2xi64>) -> tensor<2x8xf32> loc("op_dropout")
  %logits = memopt.matmul %f, %v : (tensor<2x8xf32>, tensor<8x2xf32>) -> tensor<2x2xf32>
  %loss = memopt.softmax_cross_entropy %logits, %labels : (tensor<2x2xf32>, tensor<2xi64>) -> tensor<f32> loc("op_softmax_cross_entropy")
  %dl = memopt.softmax_cross_entropy_grad %logits, %labels, %one : (tensor<2x2xf32>, tensor<2xi64>, tensor<f32>) -> tensor<2x2xf32> loc("op_softmax_cross_entropy_grad")
  %dv = memopt.gemm %f, %dl {transA = 1 : i64} : (tensor<2x8xf32>, tensor<2x2xf32>) -> tensor<8x2xf32>
  %df = memopt.gemm %dl, %v {transB = 1 : i64} : (tensor<2x2xf32>, tensor<8x2xf32>) -> tensor<2x8xf32>
  memopt.adamw_update %v, %dv, %va, %vb, lr %lr, step %step accumulate %vacc, micro_step %micro {accumulation_steps = 2 : i64} : tensor<8x2xf32>, tensor<8x2xf32>, tensor<8x2xf32>, tensor<8x2xf32>, tensor<f32>, tensor<f32>, tensor<8x2xf32>, tensor<f32> loc("op_adamw_update")
  %dp = memopt.reshape %df : (tensor<2x8xf32>) -> tensor<2x2x2x2xf32>
  %dy = memopt.pool_grad %y, %dp {kind = "max", kernel_shape = array<i64: 2, 2>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<2x2x3x3xf32>, tensor<2x2x2x2xf32>) -> tensor<2x2x3x3xf32> loc("op_pool_grad")
  %dyr = memopt.relu_grad %dy, %y : (tensor<2x2x3x3xf32>, tensor<2x2x3x3xf32>) -> tensor<2x2x3x3xf32> loc("op_relu_grad")
  %dc, %dg, %dgb = memopt.batch_norm_training_grad %c, %dyr, %g, %bm, %bs : (tensor<2x2x3x3xf32>, tensor<2x2x3x3xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<2x2x3x3xf32>, tensor<2xf32>, tensor<2xf32>) loc("op_batch_norm_training_grad")
  memopt.sgd_update %g, %dg, momentum %gm, lr %lr {momentum = 0.9 : f32} : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<f32>
  %dgbs = memopt.reduce_scatter %dgb {ranks = 1 : i64, bucket = 0 : i64} : (tensor<2xf32>) -> tensor<2xf32> loc("op_reduce_scatter")
  memopt.wait_collectives %dgb, %dgbs {bucket = 0 : i64} : tensor<2xf32>, tensor<2xf32> loc("op_wait_collectives")
  %gbw = memopt.gather_parameter %gb {ranks = 1 : i64} : (tensor<2xf32>) -> tensor<1x2xf32> loc("op_gather_parameter")
  memopt.sgd_update %gb, %dgbs, momentum %gbm, lr %lr {momentum = 0.9 : f32} : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<f32>
  memopt.all_gather %gb {ranks = 1 : i64} : tensor<2xf32> loc("op_all_gather")
  %dlx, %dls, %dlb = memopt.layer_normalization_grad %f, %df, %ls : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) loc("op_layer_normalization_grad")
  %dlsr = memopt.all_reduce %dls : (tensor<8xf32>) -> tensor<8xf32> loc("op_all_reduce")
  memopt.sgd_update %ls, %dlsr, momentum %lsm, lr %lr {momentum = 0.9 : f32} : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<f32>
  %dw = memopt.conv_backward_filter %x, %dc {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<2x1x5x5xf32>, tensor<2x2x3x3xf32>) -> tensor<2x1x3x3xf32> loc("op_conv_backward_filter")
  %dwlow = memopt.cast %dw : (tensor<2x1x3x3xf32>) -> tensor<2x1x3x3xf16>
  %found = memopt.found_inf %dwlow, %dls : (tensor<2x1x3x3xf16>, tensor<8xf32>) -> tensor<f32> loc("op_found_inf")
  memopt.sgd_update %w, %dwlow, momentum %m, lr %lr loss_scale %scale, found_inf %found {momentum = 0.9 : f32} : tensor<2x1x3x3xf32>, tensor<2x1x3x3xf16>, tensor<2x1x3x3xf32>, tensor<f32>, tensor<f32>, tensor<f32> loc("op_sgd_update")
  memopt.update_loss_scale %scale, %scalestate, found_inf %found : tensor<f32>, tensor<2xf32>, tensor<f32> loc("op_update_loss_scale")
  %aw = memopt.variable "aw" {initial_value = dense<0.5> : tensor<2x3x4xf32>, role = "parameter"} : tensor<2x3x4xf32>
  %am = memopt.variable "aw.momentum_buffer" {role = "optimizer_state"} : tensor<2x3x4xf32>
  %ay, %alse = memopt.attention %aw, %aw, %aw dropout_key %key {scale = 0.5 : f32, causal = true, return_lse = true, dropout_ratio = 0.25 : f32, dropout_stream = 7 : i64} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2xi64>) -> (tensor<2x3x4xf32>, tensor<2x3x2xf32>)
  %adq, %adk, %adv = memopt.attention_grad %aw, %aw, %aw, %ay, %ay, %alse dropout_key %key {scale = 0.5 : f32, causal = true, dropout_ratio = 0.25 : f32, dropout_stream = 7 : i64} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x2xf32>, tensor<2xi64>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) loc("op_attention_grad")
  %adqk = memopt.add %adq, %adk : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %ag = memopt.add %adqk, %adv : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  memopt.sgd_update %aw, %ag, momentum %am, lr %lr {momentum = 0.9 : f32} : tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<f32>
  %hw = memopt.variable "hw" {initial_value = dense<0.125> : tensor<3x8xf32>, role = "parameter"} : tensor<3x8xf32>
  %hm = memopt.variable "hw.momentum_buffer" {role = "optimizer_state"} : tensor<3x8xf32>
  %hloss, %hlse = memopt.linear_cross_entropy %f, %hw, %labels : (tensor<2x8xf32>, tensor<3x8xf32>, tensor<2xi64>) -> (tensor<f32>, tensor<2xf32>) loc("op_linear_cross_entropy")
  %hdx, %hdw = memopt.linear_cross_entropy_grad %f, %hw, %labels, %hlse, %one : (tensor<2x8xf32>, tensor<3x8xf32>, tensor<2xi64>, tensor<2xf32>, tensor<f32>) -> (tensor<2x8xf32>, tensor<3x8xf32>) loc("op_linear_cross_entropy_grad")
  memopt.sgd_update %hw, %hdw, momentum %hm, lr %lr {momentum = 0.9 : f32} : tensor<3x8xf32>, tensor<3x8xf32>, tensor<3x8xf32>, tensor<f32>
  %mean = memopt.reduce_mean %c {axes = array<i64: 0, 2, 3>, keepdims = 0 : i64} : (tensor<2x2x3x3xf32>) -> tensor<2xf32>
  memopt.assign %mean to %stat : tensor<2xf32>, tensor<2xf32> loc("op_assign")
  %probe = memopt.variable "nhwc_probe" {initial_value = dense<0.0> : tensor<2xf32>, role = "statistic"} : tensor<2xf32>
  %xl = memopt.transpose %x {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x1x5x5xf32>) -> tensor<2x5x5x1xf32>
  %wl = memopt.transpose %w {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x1x3x3xf32>) -> tensor<2x3x3x1xf32>
  %cl = memopt.conv %xl, %wl {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, channels_last} : (tensor<2x5x5x1xf32>, tensor<2x3x3x1xf32>) -> tensor<2x3x3x2xf32>
  %yl, %bml, %bsl = memopt.batch_norm_training %cl, %g, %gb {activation = "relu", channels_last} : (tensor<2x3x3x2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<2x3x3x2xf32>, tensor<2xf32>, tensor<2xf32>) loc("nhwc_batch_norm_training")
  %pl = memopt.max_pool %yl {kernel_shape = array<i64: 2, 2>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, channels_last} : (tensor<2x3x3x2xf32>) -> tensor<2x2x2x2xf32>
  %dyl = memopt.pool_grad %yl, %pl {kind = "max", kernel_shape = array<i64: 2, 2>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, channels_last} : (tensor<2x3x3x2xf32>, tensor<2x2x2x2xf32>) -> tensor<2x3x3x2xf32> loc("nhwc_pool_grad")
  %dcl, %dgl, %dgbl = memopt.batch_norm_training_grad %cl, %dyl, %g, %bml, %bsl {channels_last} : (tensor<2x3x3x2xf32>, tensor<2x3x3x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<2x3x3x2xf32>, tensor<2xf32>, tensor<2xf32>) loc("nhwc_batch_norm_training_grad")
  %dxl = memopt.conv_transpose %dcl, %wl {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, channels_last} : (tensor<2x3x3x2xf32>, tensor<2x3x3x1xf32>) -> tensor<2x5x5x1xf32> loc("nhwc_conv_transpose")
  %dwl = memopt.conv_backward_filter %xl, %dcl {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, channels_last} : (tensor<2x5x5x1xf32>, tensor<2x3x3x2xf32>) -> tensor<2x3x3x1xf32> loc("nhwc_conv_backward_filter")
  %sw = memopt.reduce_sum %dwl {axes = array<i64: 1, 2, 3>, keepdims = 0 : i64} : (tensor<2x3x3x1xf32>) -> tensor<2xf32>
  %sx = memopt.reduce_sum %dxl {axes = array<i64: 0, 1, 2, 3>, keepdims = 0 : i64} : (tensor<2x5x5x1xf32>) -> tensor<f32>
  %s1 = memopt.add %sw, %sx : (tensor<2xf32>, tensor<f32>) -> tensor<2xf32>
  %s2 = memopt.add %s1, %dgl : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %s3 = memopt.add %s2, %dgbl : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %fm, %fi, %fa, %fb = memopt.batch_norm_stats %cl, %g, %gb {channels_last} : (tensor<2x3x3x2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) loc("op_batch_norm_stats")
  %wf = memopt.constant dense<0.5> : tensor<2x1x1x2xf32>
  %yf = memopt.norm_relu_conv %cl, %wf, %fa, %fb {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, channels_last} : (tensor<2x3x3x2xf32>, tensor<2x1x1x2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<2x3x3x2xf32> loc("op_norm_relu_conv")
  %dwf = memopt.norm_relu_conv_backward_filter %cl, %yf, %fa, %fb {kernel_shape = array<i64: 1, 1>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, channels_last} : (tensor<2x3x3x2xf32>, tensor<2x3x3x2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<2x1x1x2xf32> loc("op_norm_relu_conv_backward_filter")
  %dcf, %dgf, %dbf = memopt.batch_norm_relu_grad %cl, %yf, %g, %fm, %fi, %fa, %fb {channels_last} : (tensor<2x3x3x2xf32>, tensor<2x3x3x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<2x3x3x2xf32>, tensor<2xf32>, tensor<2xf32>) loc("op_batch_norm_relu_grad")
  %rf = memopt.norm_relu_apply %cl, %fa, %fb {channels_last} : (tensor<2x3x3x2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<2x3x3x2xf32> loc("op_norm_relu_apply")
  %srf = memopt.reduce_sum %rf {axes = array<i64: 0, 1, 2>, keepdims = 0 : i64} : (tensor<2x3x3x2xf32>) -> tensor<2xf32>
  %swf = memopt.reduce_sum %dwf {axes = array<i64: 1, 2, 3>, keepdims = 0 : i64} : (tensor<2x1x1x2xf32>) -> tensor<2xf32>
  %sdc = memopt.reduce_sum %dcf {axes = array<i64: 0, 1, 2>, keepdims = 0 : i64} : (tensor<2x3x3x2xf32>) -> tensor<2xf32>
  %s4 = memopt.add %s3, %swf : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %s5 = memopt.add %s4, %sdc : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %s6 = memopt.add %s5, %dgf : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %s7 = memopt.add %s6, %dbf : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %s8 = memopt.add %s7, %srf : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %ya, %ma, %ia = memopt.batch_norm_training %cl, %g, %gb residual %rf {activation = "relu", channels_last} : (tensor<2x3x3x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2x3x3x2xf32>) -> (tensor<2x3x3x2xf32>, tensor<2xf32>, tensor<2xf32>) loc("residual_batch_norm_training")
  %dca, %dga, %dba, %dza = memopt.batch_norm_add_relu_grad %cl, %yf, %ya, %g, %ma, %ia {channels_last} : (tensor<2x3x3x2xf32>, tensor<2x3x3x2xf32>, tensor<2x3x3x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<2x3x3x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2x3x3x2xf32>) loc("op_batch_norm_add_relu_grad")
  %sda = memopt.reduce_sum %dca {axes = array<i64: 0, 1, 2>, keepdims = 0 : i64} : (tensor<2x3x3x2xf32>) -> tensor<2xf32>
  %sza = memopt.reduce_sum %dza {axes = array<i64: 0, 1, 2>, keepdims = 0 : i64} : (tensor<2x3x3x2xf32>) -> tensor<2xf32>
  %s9 = memopt.add %s8, %sda : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %s10 = memopt.add %s9, %sza : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %s11 = memopt.add %s10, %dga : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %s12 = memopt.add %s11, %dba : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  memopt.assign %s12 to %probe : tensor<2xf32>, tensor<2xf32>
  return %loss : tensor<f32>
}
