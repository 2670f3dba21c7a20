// SPDX-License-Identifier: MIT
// safetensors files, state_dict and model files: round trips on every device,
// the dtypes the format names, PyTorch's names, strict and non-strict loads,
// and hostile files (each a clear error naming the file).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cnn.h"
#include "helpers.h"
#include "mlp.h"
#include "vit.h"

namespace fs = std::filesystem;
using sy::Tensor;

namespace {

std::string temp_path(const std::string& name) {
  auto dir = fs::temp_directory_path() / ("sy_serialize_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return (dir / name).string();
}

// A file's bytes: the 8-byte length, the header as given, then `data`.
std::string file_bytes(const std::string& header, const std::string& data = "") {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char(n >> (8 * i));
  return out + header + data;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

template <class T>
std::string raw(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

class Serialize : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { SKIP_UNLESS_AVAILABLE(GetParam()); }
};

TEST_P(Serialize, TensorsRoundTripWithTheirDtypesShapesAndMetadata) {
  auto& d = sy::device(GetParam());
  const std::string path =
      temp_path("roundtrip_" + sy::device(GetParam()).info().backend + ".safetensors");
  std::vector<float> w = random_vec(12, 3);
  sy::NamedTensors in{
      {"w", sy::from_vector(w, {3, 4}, d)},
      {"ids", sy::from_vector(std::vector<int32_t>{-7, 0, 2147483647}, {3}, d)},
      {"big", sy::from_vector(std::vector<int64_t>{int64_t(1) << 40, -1}, {2, 1}, d)},
      {"mask", sy::from_vector(std::vector<uint8_t>{0, 1, 255}, {3}, d)},
      {"empty", sy::zeros({0, 5}, d)},
      {"scalar", sy::full({}, 2.5f, d)},
  };
  sy::save_safetensors(path, in, {{"epoch", "3"}, {"note", "héllo"}});

  // The layout: a little-endian length, JSON, data starting 8-byte aligned.
  std::ifstream f(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), {});
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  auto header = nlohmann::json::parse(bytes.substr(8, size_t(n)));
  EXPECT_EQ(header["w"]["dtype"], "F32");
  EXPECT_EQ(header["w"]["shape"], (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(header["w"]["data_offsets"], (std::vector<uint64_t>{0, 48}));
  EXPECT_EQ(header["ids"]["dtype"], "I32");
  EXPECT_EQ(header["big"]["dtype"], "I64");
  EXPECT_EQ(header["mask"]["dtype"], "U8");
  EXPECT_EQ(header["__metadata__"]["epoch"], "3");

  for (auto* target : {&d, &sy::cpu()}) {
    sy::Metadata meta;
    auto out = sy::load_safetensors(path, *target, &meta);
    EXPECT_EQ(meta.at("note"), "héllo");
    std::map<std::string, Tensor> got(out.begin(), out.end());
    ASSERT_EQ(got.size(), in.size());
    EXPECT_EQ(&got["w"].device(), target);
    EXPECT_EQ(got["w"].to_vector<float>(), w);
    EXPECT_EQ(got["w"].shape(), (sy::Shape{3, 4}));
    EXPECT_EQ(got["ids"].to_vector<int32_t>(), (std::vector<int32_t>{-7, 0, 2147483647}));
    EXPECT_EQ(got["big"].to_vector<int64_t>(), (std::vector<int64_t>{int64_t(1) << 40, -1}));
    EXPECT_EQ(got["mask"].to_vector<uint8_t>(), (std::vector<uint8_t>{0, 1, 255}));
    EXPECT_EQ(got["empty"].shape(), (sy::Shape{0, 5}));
    EXPECT_EQ(got["scalar"].shape(), sy::Shape{});
    EXPECT_EQ(got["scalar"].item(), 2.5f);
  }
}

TEST_P(Serialize, StoredDtypesConvertToSwitchyardsOnLoad) {
  auto& d = sy::device(GetParam());
  // F16: 1, -2, 65504 (max), 2^-24 (smallest subnormal), inf.
  std::vector<uint16_t> f16{0x3c00, 0xc000, 0x7bff, 0x0001, 0x7c00};
  std::vector<uint16_t> bf16{0x3f80, 0xc040};  // 1, -3
  std::vector<double> f64{0.1, -1e10};
  std::vector<int16_t> i16{-32768, 5};
  std::vector<int8_t> i8{-128, 127};
  std::vector<uint16_t> u16{65535, 1};
  std::vector<uint32_t> u32{4294967295u, 0};
  std::vector<uint8_t> boolean{0, 1};
  std::string data;
  nlohmann::ordered_json h;
  auto add = [&](const char* name, const char* dtype, int64_t n, const std::string& bytes) {
    h[name] = {{"dtype", dtype},
               {"shape", {n}},
               {"data_offsets", {data.size(), data.size() + bytes.size()}}};
    data += bytes;
  };
  add("f16", "F16", 5, raw(f16));
  add("bf16", "BF16", 2, raw(bf16));
  add("f64", "F64", 2, raw(f64));
  add("i16", "I16", 2, raw(i16));
  add("i8", "I8", 2, raw(i8));
  add("u16", "U16", 2, raw(u16));
  add("u32", "U32", 2, raw(u32));
  add("bool", "BOOL", 2, raw(boolean));
  add("u64", "U64", 1, raw(std::vector<uint64_t>{1}));
  const std::string path = temp_path("dtypes.safetensors");
  write_file(path, file_bytes(h.dump(), data));

  sy::SafetensorsFile f(path);
  // F16 and BF16 are kept as stored (published weights are not widened).
  EXPECT_EQ(f.tensor("f16", d).dtype(), sy::DType::f16);
  EXPECT_EQ(f.tensor("bf16", d).dtype(), sy::DType::bf16);
  EXPECT_EQ(f.dtype_of(*f.find("bf16")), sy::DType::bf16);
  auto v16 = f.tensor("f16", d).to_vector<float>();
  EXPECT_EQ(v16[0], 1.f);
  EXPECT_EQ(v16[1], -2.f);
  EXPECT_EQ(v16[2], 65504.f);
  EXPECT_EQ(v16[3], std::ldexp(1.f, -24));
  EXPECT_TRUE(std::isinf(v16[4]));
  EXPECT_EQ(f.tensor("bf16", d).to_vector<float>(), (std::vector<float>{1.f, -3.f}));
  EXPECT_EQ(f.tensor("f64", d).to_vector<float>(), (std::vector<float>{0.1f, -1e10f}));
  EXPECT_EQ(f.tensor("i16", d).to_vector<int32_t>(), (std::vector<int32_t>{-32768, 5}));
  EXPECT_EQ(f.tensor("i8", d).to_vector<int32_t>(), (std::vector<int32_t>{-128, 127}));
  EXPECT_EQ(f.tensor("u16", d).to_vector<int32_t>(), (std::vector<int32_t>{65535, 1}));
  EXPECT_EQ(f.tensor("u32", d).to_vector<int64_t>(), (std::vector<int64_t>{4294967295, 0}));
  EXPECT_EQ(f.tensor("bool", d).to_vector<uint8_t>(), (std::vector<uint8_t>{0, 1}));
  expect_error([&] { f.tensor("u64", d); },
               {"dtypes.safetensors", "'u64'", "U64", "cannot represent"});
  expect_error([&] { f.tensor("nope", d); }, {"expected a tensor named 'nope'"});
}

TEST(SafetensorsChecksum, CoversHeaderAndDataAndIsRewrittenOnSave) {
  const std::string path = temp_path("crc.safetensors");
  sy::save_safetensors(path, {{"w", sy::full({64}, 0.5f)}}, {{"epoch", "4"}});
  EXPECT_TRUE(sy::SafetensorsFile(path).verify());
  std::string bytes;
  {
    std::ifstream f(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), {});
  }
  auto flip = [&](size_t at, char to) {
    std::string b = bytes;
    b[at] = to;
    write_file(path, b);
  };
  flip(bytes.find("\"4\"") + 1, '5');  // the metadata: epoch 4 -> 5
  expect_error([&] { sy::SafetensorsFile(path).verify(); }, {"does not match its checksum"});
  flip(bytes.size() - 3, 'x');  // the data
  expect_error([&] { sy::load_safetensors(path); }, {"does not match its checksum"});
  // Saving a loaded file's metadata writes a new checksum, not the old one.
  write_file(path, bytes);
  sy::Metadata meta;
  auto ts = sy::load_safetensors(path, sy::cpu(), &meta);
  ts[0].second = sy::full({64}, 1.5f);
  const std::string copy = temp_path("crc_copy.safetensors");
  sy::save_safetensors(copy, ts, meta);
  EXPECT_TRUE(sy::SafetensorsFile(copy).verify());
  EXPECT_NE(sy::SafetensorsFile(copy).metadata().at("switchyard.crc32"),
            meta.at("switchyard.crc32"));
}

INSTANTIATE_TEST_SUITE_P(Devices, Serialize, ::testing::ValuesIn(conformance_devices()),
                         [](const auto& info) { return device_param_name(info.param); });

// ---- hostile files ----------------------------------------------------------

struct Hostile {
  const char* what;
  std::string bytes;
  std::vector<std::string> needles;
};

std::string tensor_json(const std::string& name, const std::string& dtype, const std::string& shape,
                        const std::string& offsets) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
         ",\"data_offsets\":" + offsets + "}";
}

// 200,000 empty tensors: a header nlohmann-json's callback parser took
// minutes over (it rescanned the object after every entry); now a linear
// pass and a plain parse (bench_header_parse times 1M). Saved the same way:
// ordered_json's operator[] made saving quadratic too.
TEST(SafetensorsFiles, HeadersOfManyTensorsOpenAndSave) {
  constexpr int n = 200000;
  std::string h = "{";
  for (int i = 0; i < n; ++i) {
    if (i) h += ",";
    h += tensor_json(std::string("t").append(std::to_string(i)), "F32", "[0]", "[0,0]");
  }
  h += "}";
  const std::string path = temp_path("many.safetensors");
  write_file(path, file_bytes(h));
  sy::SafetensorsFile f(path);
  ASSERT_EQ(f.entries().size(), size_t(n));
  EXPECT_EQ(f.tensor("t123456", sy::cpu()).numel(), 0);
  sy::NamedTensors ts;
  for (int i = 0; i < 20000; ++i)
    ts.push_back({std::string("w").append(std::to_string(i)), sy::zeros({0})});
  sy::save_safetensors(path, ts);
  EXPECT_EQ(sy::SafetensorsFile(path).entries().size(), 20000u);
  std::remove(path.c_str());
}

TEST(SafetensorsFiles, HostileFilesAreClearErrors) {
  const std::string four(4, 'x'), eight(8, 'x');
  std::string deep = "{\"a\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  // Counted while the text is read, before any entry is checked or built.
  std::string many_names = "{";
  for (int i = 0; i <= (1 << 20); ++i) {
    many_names += i ? ",\"" : "\"";
    many_names += std::to_string(i);
    many_names += "\":{}";
  }
  many_names += "}";
  std::string huge_len(8, '\0');
  huge_len[0] = char(200);  // 200 bytes of header in a file of 10
  std::string over_cap(8, '\0');
  uint64_t cap = 100'000'001;
  std::memcpy(over_cap.data(), &cap, 8);
  std::vector<Hostile> cases = {
      {"shorter than the length", "abc", {"expected at least 8 bytes", "found 3"}},
      {"length past the end", huge_len + "{}", {"past the end of the file"}},
      {"length over the cap", over_cap + "{}", {"at most 100000000 bytes"}},
      {"not an object", file_bytes("[1,2]"), {"start with '{'"}},
      {"broken JSON", file_bytes("{\"a\":"), {"not valid JSON"}},
      {"non-UTF-8 name", file_bytes("{\"\xff\xfe\":{}}"), {"not valid JSON", "UTF-8"}},
      {"nesting bomb", file_bytes(deep), {"nested at most 3 deep"}},
      {"more than 2^20 tensors", file_bytes(many_names), {"at most 1048576 tensors"}},
      {"duplicate names",
       file_bytes("{" + tensor_json("a", "U8", "[4]", "[0,4]") + "," +
                      tensor_json("a", "U8", "[4]", "[4,8]") + "}",
                  eight),
       {"unique tensor names", "'a' twice"}},
      {"duplicate fields",
       file_bytes("{\"a\":{\"dtype\":\"U8\",\"dtype\":\"F32\"}}"),
       {"each field once", "'dtype' twice"}},
      {"offsets past the end",
       file_bytes("{" + tensor_json("a", "U8", "[8]", "[0,8]") + "}", four),
       {"'a'", "ends at byte 8", "data section's 4 bytes"}},
      {"begin after end",
       file_bytes("{" + tensor_json("a", "U8", "[0]", "[4,0]") + "}", four),
       {"begin <= end"}},
      {"overlapping",
       file_bytes("{" + tensor_json("a", "U8", "[4]", "[0,4]") + "," +
                      tensor_json("b", "U8", "[4]", "[2,6]") + "}",
                  eight),
       {"overlapping"}},
      {"a hole",
       file_bytes("{" + tensor_json("a", "U8", "[4]", "[4,8]") + "}", eight),
       {"a hole before it"}},
      {"trailing bytes",
       file_bytes("{" + tensor_json("a", "U8", "[4]", "[0,4]") + "}", eight),
       {"fill the data section's 8 bytes", "end at byte 4"}},
      {"shape overflow",
       file_bytes("{" + tensor_json("a", "F32", "[4294967296,4294967296]", "[0,4]") + "}", four),
       {"overflows"}},
      {"dtype and size disagree",
       file_bytes("{" + tensor_json("a", "F32", "[4]", "[0,4]") + "}", four),
       {"expected 16 bytes for tensor 'a'", "found a range of 4"}},
      {"unknown dtype",
       file_bytes("{" + tensor_json("a", "F31", "[4]", "[0,4]") + "}", four),
       {"unknown dtype 'F31'"}},
      {"negative dimension",
       file_bytes("{" + tensor_json("a", "U8", "[-4]", "[0,4]") + "}", four),
       {"non-negative integer", "-4"}},
      {"fractional offset",
       file_bytes("{" + tensor_json("a", "U8", "[4]", "[0,4.5]") + "}", four),
       {"non-negative integer"}},
      {"offsets not a pair",
       file_bytes("{" + tensor_json("a", "U8", "[4]", "[0]") + "}", four),
       {"data_offsets [begin, end]"}},
      {"missing field", file_bytes("{\"a\":{\"dtype\":\"U8\"}}"), {"expected 'shape'"}},
      {"metadata not strings", file_bytes("{\"__metadata__\":{\"k\":1}}"), {"to be strings"}},
      {"empty name",
       file_bytes("{" + tensor_json("", "U8", "[0]", "[0,0]") + "}"),
       {"non-empty tensor names"}},
  };
  for (auto& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string path = temp_path("hostile.safetensors");
    write_file(path, c.bytes);
    std::vector<std::string> needles = c.needles;
    try {
      sy::SafetensorsFile f(path);
      ADD_FAILURE() << "accepted: " << c.what;
    } catch (const sy::Error& e) {
      std::string m = e.what();
      EXPECT_NE(m.find("hostile.safetensors"), std::string::npos) << m;
      for (auto& n : needles) EXPECT_NE(m.find(n), std::string::npos) << "'" << n << "' in: " << m;
    }
    // The same bytes through the in-memory parser (the fuzz target's path).
    EXPECT_THROW(sy::SafetensorsFile::parse(c.bytes.data(), c.bytes.size(), "mem"), sy::Error);
  }
}

TEST(SafetensorsFiles, PathsThatAreNotRegularFilesAreRefused) {
  expect_error([] { sy::SafetensorsFile f(temp_path("missing.safetensors")); },
               {"load_safetensors", "missing.safetensors", "No such file"});
  expect_error([] { sy::SafetensorsFile f(fs::temp_directory_path().string()); },
               {"expected a regular file, found a directory"});
  const std::string fifo = temp_path("fifo.safetensors");
  fs::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_error([&] { sy::SafetensorsFile f(fifo); }, {"found a FIFO"});
  fs::remove(fifo);
}

TEST(SafetensorsFiles, TensorsPastFourGibibytesAreRead) {
  // A sparse file: a 4 GiB + 16 byte U8 tensor, then a small F32 one whose
  // offsets need 64 bits. Only the small one is read (the mapping touches
  // its pages alone), so this costs kilobytes of disk and memory.
  const uint64_t big = (uint64_t(1) << 32) + 16;
  std::string header =
      "{" +
      tensor_json("big", "U8", "[" + std::to_string(big) + "]", "[0," + std::to_string(big) + "]") +
      "," +
      tensor_json("small", "F32", "[4]",
                  "[" + std::to_string(big) + "," + std::to_string(big + 16) + "]") +
      "}";
  const std::string path = temp_path("large.safetensors");
  write_file(path, file_bytes(header));
  std::vector<float> small{1.5f, -2.f, 3.f, 1e-3f};
  {
    int fd = ::open(path.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    const off_t at = off_t(8 + header.size() + big);
    ASSERT_EQ(::pwrite(fd, small.data(), 16, at), 16);
    ::close(fd);
  }
  ASSERT_GT(fs::file_size(path), uint64_t(1) << 32);
  sy::SafetensorsFile f(path);
  ASSERT_EQ(f.entries().size(), 2u);
  EXPECT_EQ(f.find("small")->begin, big);
  EXPECT_EQ(f.tensor("small").to_vector<float>(), small);
  fs::remove(path);
}

// ---- state_dict -------------------------------------------------------------

// A module with named submodules, as a PyTorch class with fc1 and fc2.
class TwoLayer : public sy::nn::Module {
 public:
  explicit TwoLayer(sy::Device& d = sy::cpu()) {
    fc1 = register_module("fc1", std::make_shared<sy::nn::Linear>(4, 3, true, d));
    fc2 = register_module("fc2", std::make_shared<sy::nn::Linear>(3, 2, false, d));
  }
  Tensor forward(const Tensor& x) override { return (*fc2)(sy::relu((*fc1)(x))); }
  std::shared_ptr<sy::nn::Linear> fc1, fc2;
};

TEST(StateDict, NamesAndLayoutsArePyTorchs) {
  auto seq = sy::models::mlp({784, 256, 128, 10});
  EXPECT_EQ(
      names_of(seq->state_dict()),
      (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"}));
  EXPECT_EQ(seq->state_dict()[0].second.shape(), (sy::Shape{256, 784}));  // (out, in)
  TwoLayer m;
  EXPECT_EQ(names_of(m.state_dict()),
            (std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight"}));
}

TEST(StateDict, ANonStrictLoadSkipsEntriesOfDtypesSwitchyardLacks) {
  sy::manual_seed(3);
  TwoLayer m;
  // The model's weights plus a U64 entry (say, a step counter from elsewhere).
  std::string data;
  nlohmann::ordered_json h;
  for (auto& [name, t] : m.state_dict()) {
    auto v = t.to_vector<float>();
    h[name] = {{"dtype", "F32"},
               {"shape", t.shape()},
               {"data_offsets", {data.size(), data.size() + v.size() * 4}}};
    data += raw(v);
  }
  h["counter"] = {
      {"dtype", "U64"}, {"shape", {1}}, {"data_offsets", {data.size(), data.size() + 8}}};
  data += raw(std::vector<uint64_t>{7});
  const std::string path = temp_path("u64.safetensors");
  write_file(path, file_bytes(h.dump(), data));
  TwoLayer n;
  auto r = n.load_state_dict(sy::SafetensorsFile(path), /*strict=*/false);
  EXPECT_EQ(r.unexpected, (std::vector<std::string>{"counter"}));
  auto x = sy::randn({2, 4});
  EXPECT_EQ(n(x).to_vector<float>(), m(x).to_vector<float>());
  expect_error([&] { n.load_state_dict(sy::SafetensorsFile(path)); }, {"1 unexpected: 'counter'"});
}

TEST(OptimizerState, RoundTripsAndRefusesWhatDoesNotFit) {
  sy::manual_seed(8);
  TwoLayer a, b;
  b.load_state_dict(a.state_dict());
  sy::optim::Adam oa(a.parameters(), 1e-2f), ob(b.parameters(), 1e-2f);
  auto x = sy::randn({6, 4});
  auto step = [&](TwoLayer& m, sy::optim::Optimizer& o) {
    o.zero_grad();
    sy::sum(m(x) * m(x)).backward();
    o.step();
  };
  for (int i = 0; i < 3; ++i) step(a, oa);
  auto state = oa.state_dict();
  EXPECT_EQ(state.size(), 9u);  // 3 parameters x (exp_avg, exp_avg_sq, step)
  EXPECT_EQ(state[0].first, "state.0.exp_avg");
  EXPECT_EQ(state[2].first, "state.0.step");
  b.load_state_dict(a.state_dict());
  ob.load_state_dict(state, oa.steps());
  EXPECT_EQ(ob.steps(), 3);
  step(a, oa);
  step(b, ob);
  EXPECT_EQ(b.fc1->weight().to_vector<float>(), a.fc1->weight().to_vector<float>())
      << "the 4th step continues exactly";
  auto bad = state;
  bad.push_back({"state.0.exp_avg", state[0].second});
  expect_error([&] { ob.load_state_dict(bad, 3); }, {"'state.0.exp_avg' twice"});
  bad = state;
  bad[0].first = "state.00.exp_avg";
  expect_error([&] { ob.load_state_dict(bad, 3); }, {"unexpected 'state.00.exp_avg'"});
  bad = state;
  bad[1].second = sy::zeros({2});
  expect_error([&] { ob.load_state_dict(bad, 3); }, {"'state.0.exp_avg_sq': expected shape (3,4)"});
  bad = state;
  bad.pop_back();
  expect_error([&] { ob.load_state_dict(bad, 3); }, {"parameter 2 has 2 of its 3 state buffers"});
}

TEST(StateDict, LoadingCopiesValuesAndKeepsParameterIdentity) {
  sy::manual_seed(1);
  TwoLayer a, b;
  sy::optim::SGD opt(b.parameters(), 0.5f);
  auto x = sy::randn({5, 4});
  b.load_state_dict(a.state_dict());
  EXPECT_EQ(b(x).to_vector<float>(), a(x).to_vector<float>());
  // b's optimizer still steps b's parameters, and a is not touched (no
  // storage shared between the two models).
  auto a_before = a.fc1->weight().to_vector<float>();
  sy::sum(b(x)).backward();
  opt.step();
  EXPECT_NE(b.fc1->weight().to_vector<float>(), a_before);
  EXPECT_EQ(a.fc1->weight().to_vector<float>(), a_before);
}

TEST(StateDict, StrictLoadListsEveryProblemAndChangesNothing) {
  sy::manual_seed(2);
  TwoLayer m;
  auto before = m.fc1->weight().to_vector<float>();
  sy::NamedTensors sd{{"fc1.weight", sy::zeros({3, 4})},
                      {"fc1.bias", sy::zeros({2})},  // wrong shape
                      {"fc3.weight", sy::zeros({1})}};
  expect_error([&] { m.load_state_dict(sd); },
               {"load_state_dict", "'fc1.bias': expected shape (3) f32, found (2) f32",
                "1 missing: 'fc2.weight'", "1 unexpected: 'fc3.weight'"});
  EXPECT_EQ(m.fc1->weight().to_vector<float>(), before) << "nothing changed";
  // Not strict: names that match load; a wrong shape is still an error.
  sd[1].second = sy::ones({3});
  sd.push_back({"fc1.extra", sy::zeros({3})});
  auto r = m.load_state_dict(sd, /*strict=*/false);
  EXPECT_EQ(r.missing, (std::vector<std::string>{"fc2.weight"}));
  EXPECT_EQ(r.unexpected, (std::vector<std::string>{"fc3.weight", "fc1.extra"}));
  EXPECT_EQ(m.fc1->weight().to_vector<float>(), std::vector<float>(12, 0.f));
  EXPECT_EQ(m.fc1->bias().to_vector<float>(), std::vector<float>(3, 1.f));
  sd[0].second = sy::zeros({4, 3});
  expect_error([&] { m.load_state_dict(sd, false); },
               {"'fc1.weight': expected shape (3,4) f32, found (4,3) f32"});
  sd[0].second = sy::zeros({3, 4}).to(sy::DType::i32);
  expect_error([&] { m.load_state_dict(sd, false); },
               {"expected shape (3,4) f32, found (3,4) i32"});
}

class ModelFiles : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { SKIP_UNLESS_AVAILABLE(GetParam()); }
};

TEST_P(ModelFiles, SavedModelLoadsByPathAloneOnEveryDevice) {
  auto& d = sy::device(GetParam());
  sy::manual_seed(4);
  auto m = sy::models::mlp({6, 5, 3}, sy::models::Activation::tanh);
  auto x = sy::randn({7, 6});
  auto expected = (*m)(x).to_vector<float>();
  const std::string path = temp_path("model.safetensors");
  sy::nn::save(*m, path, {{"trained_on", "test"}});
  auto loaded = sy::nn::load(path, d);
  ASSERT_NE(loaded, nullptr);
  EXPECT_EQ(&loaded->parameters()[0].device(), &d);
  auto got = (*loaded)(x.to(d)).to_vector<float>();
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], expected[i], 1e-5f * (1.f + std::abs(expected[i]))) << i;
  EXPECT_EQ(sy::SafetensorsFile(path).metadata().at("trained_on"), "test");
  // The weights are PyTorch's names: a state_dict loader reads the same file.
  auto fresh = sy::models::mlp({6, 5, 3}, sy::models::Activation::tanh, d);
  fresh->load_state_dict(sy::SafetensorsFile(path));
  EXPECT_EQ((*fresh)(x.to(d)).to_vector<float>(), got);
}

INSTANTIATE_TEST_SUITE_P(Devices, ModelFiles, ::testing::ValuesIn(conformance_devices()),
                         [](const auto& info) { return device_param_name(info.param); });

TEST(ModelFileErrors, PlainFilesUnknownTypesAndModulesWithoutASpecAreClear) {
  const std::string plain = temp_path("plain.safetensors");
  sy::save_safetensors(plain, {{"w", sy::ones({2})}});
  expect_error([&] { sy::nn::load(plain); }, {"nn::load", "plain.safetensors",
                                              "found a plain safetensors file", "load_state_dict"});
  TwoLayer custom;
  expect_error([&] { sy::nn::save(custom, temp_path("custom.safetensors")); },
               {"nn::save", "architecture can be recorded"});
  const std::string odd = temp_path("odd.safetensors");
  sy::save_safetensors(
      odd, {},
      {{"switchyard.model",
        R"({"version":1,"module":{"type":"Sequential","children":[{"type":"Conv9d"}]}})"}});
  expect_error([&] { sy::nn::load(odd); }, {"registered module type", "'Conv9d'"});
  sy::save_safetensors(odd, {}, {{"switchyard.model", R"({"version":7,"module":{}})"}});
  expect_error([&] { sy::nn::load(odd); }, {"expected model format version 1, found 7"});
  sy::save_safetensors(odd, {},
                       {{"switchyard.model", std::string(10000, '[') + std::string(10000, ']')}});
  expect_error([&] { sy::nn::load(odd); }, {"nests deeper"});
  // A Sequential of 100,000 ReLUs: refused while the text is read (it used
  // to take minutes in the parser, then build every module).
  std::string many = R"({"version":1,"module":{"type":"Sequential","children":[)";
  for (int i = 0; i < 100000; ++i) many += i ? R"(,{"type":"ReLU"})" : R"({"type":"ReLU"})";
  sy::save_safetensors(odd, {}, {{"switchyard.model", many + "]}}"}});
  expect_error([&] { sy::nn::load(odd); }, {"expected at most 65536 modules", "found more"});
  sy::save_safetensors(
      odd, {},
      {{"switchyard.model",
        R"({"version":1,"module":{"type":"Linear","args":{"in_features":-3,"out_features":2,"bias":1}}})"}});
  expect_error([&] { sy::nn::load(odd); }, {"in_features in [1,", "found -3"});
  // The architecture and the weights disagree: the strict load says so.
  sy::save_safetensors(
      odd, {{"0.weight", sy::ones({2, 3})}},
      {{"switchyard.model",
        R"({"version":1,"module":{"type":"Sequential","children":[{"type":"Linear","args":{"in_features":3,"out_features":2,"bias":1}}]}})"}});
  expect_error([&] { sy::nn::load(odd); }, {"1 missing: '0.bias'"});
}

TEST(ModelFileErrors, DropoutAndLayerNormRoundTrip) {
  sy::manual_seed(12);
  auto m = std::make_shared<sy::nn::Sequential>();
  m->add(std::make_shared<sy::nn::Linear>(6, 8))
      .add(std::make_shared<sy::nn::LayerNorm>(8, 1e-6f))
      .add(std::make_shared<sy::nn::GELU>())
      .add(std::make_shared<sy::nn::Dropout>(0.25f))
      .add(std::make_shared<sy::nn::Linear>(8, 3));
  m->eval();
  const std::string path = temp_path("ln.safetensors");
  sy::nn::save(*m, path);
  auto loaded = sy::nn::load(path);
  loaded->eval();
  auto x = sy::randn({4, 6});
  EXPECT_EQ((*loaded)(x).to_vector<float>(), (*m)(x).to_vector<float>());
  EXPECT_EQ(
      names_of(loaded->state_dict()),
      (std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias", "4.weight", "4.bias"}));
}

TEST(ModelFileErrors, TheCnnRoundTripsWithItsRunningStatistics) {
  sy::manual_seed(13);
  auto m = sy::models::cnn();
  sy::optim::Adam opt(m->parameters(), 1e-3f);
  auto x = sy::rand({8, 784});
  auto y = sy::randint(0, 10, {8});
  for (int i = 0; i < 2; ++i) {  // running statistics away from their start
    opt.zero_grad();
    sy::cross_entropy((*m)(x), y).backward();
    opt.step();
  }
  m->eval();
  const std::string path = temp_path("cnn.safetensors");
  sy::nn::save(*m, path);
  auto loaded = sy::nn::load(path);
  loaded->eval();
  EXPECT_EQ((*loaded)(x).to_vector<float>(), (*m)(x).to_vector<float>());
  auto names = names_of(loaded->state_dict());
  EXPECT_EQ(names[0], "1.weight");  // conv (no bias), then its batch norm
  EXPECT_EQ(names[1], "2.weight");
  EXPECT_EQ(names[3], "2.running_mean");
  EXPECT_EQ(names[5], "2.num_batches_tracked");
  EXPECT_EQ(loaded->state_dict()[5].second.to_vector<int64_t>(), std::vector<int64_t>{2});
}

TEST(ModelFileErrors, TheVitRoundTrips) {
  sy::manual_seed(14);
  auto m = sy::models::vit();
  sy::optim::Adam opt(m->parameters(), 1e-3f);
  auto x = sy::rand({4, 784});
  opt.zero_grad();
  sy::cross_entropy((*m)(x), sy::randint(0, 10, {4})).backward();
  opt.step();
  m->eval();
  const std::string path = temp_path("vit.safetensors");
  sy::nn::save(*m, path);
  auto loaded = sy::nn::load(path);
  loaded->eval();
  EXPECT_EQ((*loaded)(x).to_vector<float>(), (*m)(x).to_vector<float>());
  auto names = names_of(loaded->state_dict());
  EXPECT_EQ(names[0], "0.pos");
  EXPECT_EQ(names[1], "0.proj.weight");
  EXPECT_EQ(names[5], "1.attn.qkv.weight");
}

TEST(ModelFileErrors, AnEmbeddingRoundTrips) {
  sy::manual_seed(15);
  sy::nn::Sequential m;
  m.add(std::make_shared<sy::nn::Embedding>(10, 4)).add(std::make_shared<sy::nn::Linear>(4, 3));
  const std::string path = temp_path("embedding.safetensors");
  sy::nn::save(m, path);
  auto loaded = sy::nn::load(path);
  auto idx = sy::from_vector(std::vector<int64_t>{9, 0, 3, 3}, {2, 2});
  EXPECT_EQ((*loaded)(idx).to_vector<float>(), m(idx).to_vector<float>());
  EXPECT_EQ(names_of(loaded->state_dict())[0], "0.weight");
}

TEST(ModelFileErrors, RegisteredTypesLoad) {
  sy::nn::register_module_type("TwoLayer", [](const sy::nn::ModuleSpec&, sy::Device& d) {
    return std::make_shared<TwoLayer>(d);
  });
  sy::manual_seed(6);
  TwoLayer m;
  const std::string path = temp_path("two.safetensors");
  sy::save_safetensors(path, m.state_dict(),
                       {{"switchyard.model", R"({"version":1,"module":{"type":"TwoLayer"}})"}});
  auto loaded = sy::nn::load(path);
  auto x = sy::randn({2, 4});
  EXPECT_EQ((*loaded)(x).to_vector<float>(), m(x).to_vector<float>());
}

// ---- PyTorch interop (python3-torch) ---------------------------------------

// Debian's python3 (python3-torch's), else whatever python3 is first on PATH.
const std::string& torch_python() {
  static const std::string py = [] {
    for (const char* p : {"/usr/bin/python3", "python3"})
      if (std::system((std::string(p) + " -c 'import torch' >/dev/null 2>&1").c_str()) == 0)
        return std::string(p);
    return std::string();
  }();
  return py;
}

std::string torch_unavailable() {
  if (torch_python().empty())
    return "python3-torch is not installed (bash scripts/install-deps.sh --torch installs it)";
  return "";
}

double max_rel_err(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, double(std::abs(got[i] - want[i])));
    scale = std::max(scale, double(std::abs(want[i])));
  }
  return diff / scale;
}

int run_script(const std::string& mode, const std::string& dir) {
  std::string cmd = torch_python() + " '" SWITCHYARD_SOURCE_DIR "/tests/torch_interop.py' " + mode +
                    " '" + dir + "'";
  return std::system(cmd.c_str());
}

class TorchInterop : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    SKIP_UNLESS_AVAILABLE(GetParam());
    if (auto why = torch_unavailable(); !why.empty()) GTEST_SKIP() << why;
  }
};

TEST_P(TorchInterop, ATorchStateDictLoadsAndGivesTorchsLogits) {
  auto& d = sy::device(GetParam());
  const std::string dir = temp_path("torch_" + device_param_name(GetParam()));
  fs::create_directories(dir);
  ASSERT_EQ(run_script("make", dir), 0);
  auto model = sy::models::mlp({784, 256, 128, 10}, sy::models::Activation::relu, d);
  model->load_state_dict(sy::SafetensorsFile(dir + "/torch_model.safetensors"));
  sy::SafetensorsFile io(dir + "/torch_io.safetensors");
  auto logits = (*model)(io.tensor("input", d)).to_vector<float>();
  auto want = io.tensor("logits").to_vector<float>();
  ASSERT_EQ(logits.size(), want.size());
  const double err = max_rel_err(logits, want);
  std::printf("torch_interop: torch's logits vs Switchyard's on %s: max relative error %.3g\n",
              GetParam().c_str(), err);
  EXPECT_LE(err, 1e-5) << "on " << GetParam();
}

TEST_P(TorchInterop, ASwitchyardStateDictLoadsIntoTorch) {
  auto& d = sy::device(GetParam());
  const std::string dir = temp_path("torch_back_" + device_param_name(GetParam()));
  fs::create_directories(dir);
  sy::manual_seed(11);
  auto model = sy::models::mlp({784, 256, 128, 10}, sy::models::Activation::relu, d);
  // A few steps, so the weights are not just the initialization.
  sy::optim::SGD opt(model->parameters(), 0.1f);
  auto x = sy::rand({32, 784}, d);
  auto y = sy::randint(0, 10, {32}, d);
  for (int i = 0; i < 3; ++i) {
    opt.zero_grad();
    sy::cross_entropy((*model)(x), y).backward();
    opt.step();
  }
  sy::nn::save(*model, dir + "/switchyard_model.safetensors");
  sy::save_safetensors(dir + "/switchyard_io.safetensors", {{"input", x}, {"logits", (*model)(x)}});
  EXPECT_EQ(run_script("check", dir), 0) << "torch read the file and matched the logits";
}

TEST_P(TorchInterop, ACnnMatchesTorchInTrainingAndEvaluation) {
  namespace nn = sy::nn;
  auto& d = sy::device(GetParam());
  const std::string dir = temp_path("torch_cnn_" + device_param_name(GetParam()));
  fs::create_directories(dir);
  sy::manual_seed(21);
  nn::Sequential m;  // tests/torch_interop.py's cnn()
  m.add(std::make_shared<nn::Unflatten>(std::vector<int64_t>{1, 12, 12}))
      .add(std::make_shared<nn::Conv2d>(1, 4, 3, 1, 1, 1, 1, true, d))
      .add(std::make_shared<nn::BatchNorm2d>(4, 1e-5f, 0.1f, true, d))
      .add(std::make_shared<nn::ReLU>())
      .add(std::make_shared<nn::MaxPool2d>(2))
      .add(std::make_shared<nn::Conv2d>(4, 6, 3, 2, 1, 1, 2, false, d))
      .add(std::make_shared<nn::BatchNorm2d>(6, 1e-5f, 0.1f, true, d))
      .add(std::make_shared<nn::ReLU>())
      .add(std::make_shared<nn::AvgPool2d>(2, 1))
      .add(std::make_shared<nn::Flatten>())
      .add(std::make_shared<nn::BatchNorm1d>(24, 1e-5f, 0.1f, true, d))
      .add(std::make_shared<nn::Linear>(24, 5, true, d));
  sy::save_safetensors(dir + "/cnn_before.safetensors", m.state_dict());
  auto x = sy::randn({8, 144}, d) * 2.f + 0.5f;
  auto y = sy::randint(0, 5, {8}, d);
  m.train();
  auto logits = m(x);
  sy::cross_entropy(logits, y).backward();
  sy::NamedTensors io{{"input", x}, {"labels", y}, {"logits_train", logits}};
  for (auto& [name, p] : m.named_parameters()) io.push_back({"grad." + name, p.grad()});
  sy::save_safetensors(dir + "/cnn_after.safetensors", m.state_dict());
  m.eval();
  io.push_back({"logits_eval", m(x)});
  sy::save_safetensors(dir + "/cnn_io.safetensors", io);
  EXPECT_EQ(run_script("cnn", dir), 0) << "torch computed what Switchyard did";
}

TEST_P(TorchInterop, AVitMatchesTorchInTrainingAndEvaluation) {
  namespace nn = sy::nn;
  namespace m = sy::models;
  auto& d = sy::device(GetParam());
  const std::string dir = temp_path("torch_vit_" + device_param_name(GetParam()));
  fs::create_directories(dir);
  sy::manual_seed(22);
  nn::Sequential vit;  // tests/torch_interop.py's vit(): no dropout, so training mode is exact
  vit.add(std::make_shared<m::PatchEmbedding>(7, 16, d))
      .add(std::make_shared<m::EncoderBlock>(16, 2, 32, 0.f, d))
      .add(std::make_shared<nn::LayerNorm>(16, 1e-5f, true, d))
      .add(std::make_shared<m::MeanTokens>())
      .add(std::make_shared<nn::Linear>(16, 5, true, d));
  sy::save_safetensors(dir + "/vit_before.safetensors", vit.state_dict());
  auto x = sy::rand({6, 784}, d);
  auto y = sy::randint(0, 5, {6}, d);
  auto logits = vit(x);
  sy::cross_entropy(logits, y).backward();
  sy::NamedTensors io{{"input", x}, {"labels", y}, {"logits", logits}};
  for (auto& [name, p] : vit.named_parameters()) io.push_back({"grad." + name, p.grad()});
  sy::save_safetensors(dir + "/vit_io.safetensors", io);
  EXPECT_EQ(run_script("vit", dir), 0) << "torch computed what Switchyard did";
}

INSTANTIATE_TEST_SUITE_P(Devices, TorchInterop, ::testing::ValuesIn(conformance_devices()),
                         [](const auto& info) { return device_param_name(info.param); });

}  // namespace
