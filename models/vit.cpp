// SPDX-License-Identifier: MIT
// See vit.h.
#include "vit.h"

#include <cmath>
#include <mutex>

#include "switchyard/error.h"

namespace switchyard::models {

PatchEmbedding::PatchEmbedding(int64_t patch, int64_t dim, Device& d)
    : patch_(patch), dim_(dim), tokens_((28 / patch) * (28 / patch)) {
  SY_CHECK(patch > 0 && 28 % patch == 0 && dim > 0, "PatchEmbedding",
           "expected a patch size dividing 28 and a positive dim, found ", patch, " and ", dim);
  proj_ =
      register_module("proj", std::make_shared<nn::Conv2d>(1, dim, patch, patch, 0, 1, 1, true, d));
  // N(0, 0.02), as ViT's position embeddings.
  pos_ = &register_parameter("pos", randn({1, tokens_, dim}, Options().device(d)) * 0.02f);
}

Tensor PatchEmbedding::forward(const Tensor& x) {
  SY_CHECK(x.dim() == 2 && x.size(1) == 784, "PatchEmbedding",
           "expected images as rows of 784 pixels (N, 784), found shape ", shape_str(x.shape()));
  const int64_t n = x.size(0);
  Tensor y = (*proj_)(x.reshape({n, 1, 28, 28}));      // (N, dim, g, g)
  y = transpose(y.reshape({n, dim_, tokens_}), 1, 2);  // (N, tokens, dim)
  return y + *pos_;
}

std::optional<nn::ModuleSpec> PatchEmbedding::spec() const {
  return nn::ModuleSpec("PatchEmbedding", {{"patch", patch_}, {"dim", dim_}});
}

SelfAttention::SelfAttention(int64_t dim, int64_t heads, Device& d) : dim_(dim), heads_(heads) {
  SY_CHECK(dim > 0 && heads > 0 && dim % heads == 0, "SelfAttention",
           "expected a dim divisible by the number of heads, found ", dim, " and ", heads);
  qkv_ = register_module("qkv", std::make_shared<nn::Linear>(dim, 3 * dim, true, d));
  proj_ = register_module("proj", std::make_shared<nn::Linear>(dim, dim, true, d));
}

Tensor SelfAttention::forward(const Tensor& x) {
  SY_CHECK(x.dim() == 3 && x.size(2) == dim_, "SelfAttention", "expected (N, S, ", dim_,
           "), found shape ", shape_str(x.shape()));
  const int64_t n = x.size(0), s = x.size(1), hd = dim_ / heads_;
  // (N, S, 3 * dim) -> (N, 3 * heads, S, hd) -> (3, N * heads, S, hd)
  Tensor qkv = transpose((*qkv_)(x).reshape({n, s, 3 * heads_, hd}), 1, 2);
  qkv = transpose(qkv.reshape({n, 3, heads_ * s * hd}), 0, 1).reshape({3, n * heads_, s, hd});
  auto part = [&](int64_t i) { return qkv.slice(i, i + 1).reshape({n * heads_, s, hd}); };
  Tensor q = part(0) * (1.f / std::sqrt(float(hd))), k = part(1), v = part(2);
  Tensor attn = softmax(bmm(q, transpose(k, 1, 2)), -1);  // (N * heads, S, S)
  Tensor out = bmm(attn, v).reshape({n, heads_, s, hd});
  return (*proj_)(transpose(out, 1, 2).reshape({n, s, dim_}));
}

EncoderBlock::EncoderBlock(int64_t dim, int64_t heads, int64_t mlp, float dropout, Device& d)
    : dim_(dim), heads_(heads), mlp_(mlp), p_(dropout) {
  SY_CHECK(mlp > 0 && dropout >= 0.f && dropout < 1.f, "EncoderBlock",
           "expected a positive MLP width and dropout in [0, 1), found ", mlp, " and ", dropout);
  ln1_ = register_module("ln1", std::make_shared<nn::LayerNorm>(dim, 1e-5f, true, d));
  attn_ = register_module("attn", std::make_shared<SelfAttention>(dim, heads, d));
  ln2_ = register_module("ln2", std::make_shared<nn::LayerNorm>(dim, 1e-5f, true, d));
  fc1_ = register_module("fc1", std::make_shared<nn::Linear>(dim, mlp, true, d));
  fc2_ = register_module("fc2", std::make_shared<nn::Linear>(mlp, dim, true, d));
}

Tensor EncoderBlock::forward(const Tensor& x) {
  const bool train = is_training();
  Tensor h = x + dropout((*attn_)((*ln1_)(x)), p_, train);
  return h + dropout((*fc2_)(gelu((*fc1_)((*ln2_)(h)))), p_, train);
}

std::optional<nn::ModuleSpec> EncoderBlock::spec() const {
  return nn::ModuleSpec("EncoderBlock", {{"dim", dim_}, {"heads", heads_}, {"mlp", mlp_}}, {},
                        {{"dropout", double(p_)}});
}

void register_vit_modules() {
  static std::once_flag once;
  std::call_once(once, [] {
    nn::register_module_type("PatchEmbedding", [](const nn::ModuleSpec& s, Device& d) {
      return std::make_shared<PatchEmbedding>(s.arg("patch", 1, 28), s.arg("dim", 1, 1 << 16), d);
    });
    nn::register_module_type("EncoderBlock", [](const nn::ModuleSpec& s, Device& d) {
      return std::make_shared<EncoderBlock>(s.arg("dim", 1, 1 << 16), s.arg("heads", 1, 1 << 10),
                                            s.arg("mlp", 1, 1 << 20),
                                            float(s.real("dropout", 0.0, 1.0)), d);
    });
    nn::register_module_type("MeanTokens", [](const nn::ModuleSpec&, Device&) {
      return std::make_shared<MeanTokens>();
    });
  });
}

std::shared_ptr<nn::Sequential> vit(Device& d) {
  register_vit_modules();
  const int64_t dim = 64;
  auto m = std::make_shared<nn::Sequential>();
  m->add(std::make_shared<PatchEmbedding>(7, dim, d));
  for (int i = 0; i < 4; ++i) m->add(std::make_shared<EncoderBlock>(dim, 4, 128, 0.1f, d));
  m->add(std::make_shared<nn::LayerNorm>(dim, 1e-5f, true, d));
  m->add(std::make_shared<MeanTokens>());
  m->add(std::make_shared<nn::Linear>(dim, 10, true, d));
  return m;
}

}  // namespace switchyard::models
