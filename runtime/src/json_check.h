// SPDX-License-Identifier: MIT
// A linear-time pass over untrusted JSON text before it is parsed into a
// value: nesting depth and each key checked as the text is read (through
// nlohmann-json's SAX interface, which keeps its own stack: no recursion),
// so a nesting bomb or a million-entry object is refused or counted without
// building anything. nlohmann-json's callback parser, used for this before,
// rescans the parent object after every child: a header of 100,000 entries
// took minutes.
#pragma once
#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace switchyard::detail {

// Containers may open at depths 0 .. max_depth - 1 (the root object or
// array is at depth 0); `on_key(depth, key)` sees each object key with the
// number of containers open around it (the root's keys: 1), and may throw;
// `on_open(depth)` each container about to open. Throws whatever they
// throw, `too_deep(depth)`'s error for a container at max_depth, and
// nlohmann::json::parse_error for text that is not JSON.
struct JsonCheck final : nlohmann::json_sax<nlohmann::json> {
  int max_depth = 64;
  std::function<void(int)> too_deep;
  std::function<void(int, const std::string&)> on_key;
  std::function<void(int)> on_open;

  void run(const std::string& text) { nlohmann::json::sax_parse(text, this); }

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return open(); }
  bool start_array(std::size_t) override { return open(); }
  bool end_object() override { return --depth_, true; }
  bool end_array() override { return --depth_, true; }
  bool key(string_t& k) override {
    if (on_key) on_key(depth_, k);
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::json::exception& e) override {
    throw e;
  }

 private:
  int depth_ = 0;
  bool open() {
    if (depth_ >= max_depth && too_deep) too_deep(depth_);
    if (on_open) on_open(depth_);
    ++depth_;
    return true;
  }
};

}  // namespace switchyard::detail
