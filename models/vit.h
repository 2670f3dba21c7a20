// SPDX-License-Identifier: MIT
// A small vision transformer for 28x28 single-channel images given as rows
// of 784 pixels (Fashion-MNIST as the DataLoader yields it).
#pragma once
#include <memory>

#include "switchyard/nn.h"

namespace switchyard::models {

// Non-overlapping patches (a conv of kernel and stride `patch`) projected to
// `dim`, plus a learned position embedding: (N, 784) -> (N, tokens, dim).
class PatchEmbedding : public nn::Module {
 public:
  PatchEmbedding(int64_t patch, int64_t dim, Device& d = cpu());
  Tensor forward(const Tensor& x) override;
  std::optional<nn::ModuleSpec> spec() const override;

 private:
  int64_t patch_, dim_, tokens_;
  std::shared_ptr<nn::Conv2d> proj_;
  Tensor* pos_;
};

// Multi-head self-attention over (N, S, dim): one Linear for q, k and v,
// softmax(q k^T / sqrt(head_dim)) v per head by bmm, then a projection.
class SelfAttention : public nn::Module {
 public:
  SelfAttention(int64_t dim, int64_t heads, Device& d = cpu());
  Tensor forward(const Tensor& x) override;

 private:
  int64_t dim_, heads_;
  std::shared_ptr<nn::Linear> qkv_, proj_;
};

// A pre-norm encoder block: x + attn(LN(x)), then x + MLP(LN(x)), the MLP
// Linear(dim, mlp), GELU, Linear(mlp, dim), with dropout on both branches.
class EncoderBlock : public nn::Module {
 public:
  EncoderBlock(int64_t dim, int64_t heads, int64_t mlp, float dropout = 0.1f, Device& d = cpu());
  Tensor forward(const Tensor& x) override;
  std::optional<nn::ModuleSpec> spec() const override;

 private:
  int64_t dim_, heads_, mlp_;
  float p_;
  std::shared_ptr<nn::LayerNorm> ln1_, ln2_;
  std::shared_ptr<SelfAttention> attn_;
  std::shared_ptr<nn::Linear> fc1_, fc2_;
};

// (N, S, dim) -> (N, dim): the mean over the tokens.
class MeanTokens : public nn::Module {
 public:
  Tensor forward(const Tensor& x) override { return mean(x, 1); }
  std::optional<nn::ModuleSpec> spec() const override { return nn::ModuleSpec("MeanTokens"); }
};

// Patch 7 (16 tokens) of 64 dims, 4 blocks of 4 heads with an MLP of 128,
// a final LayerNorm, mean pooling, Linear(64, 10).
std::shared_ptr<nn::Sequential> vit(Device& d = cpu());

// Registers PatchEmbedding, EncoderBlock and MeanTokens with nn::load (once;
// vit() does it too).
void register_vit_modules();

}  // namespace switchyard::models
