// SPDX-License-Identifier: MIT
// `switchyard bench`'s outputs: table, JSON, CSV and SVG.
#include "report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "switchyard/backend/files.h"

namespace switchyard::bench {

namespace {

std::string num(double v, int prec = 4) {
  if (!std::isfinite(v)) return "null";
  char b[64];
  std::snprintf(b, sizeof b, "%.*g", prec + 2, v);
  return b;
}

std::string xml(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '&')
      o += "&amp;";
    else if (c == '<')
      o += "&lt;";
    else if (c == '>')
      o += "&gt;";
    else if (c == '"')
      o += "&quot;";
    else
      o += c;
  }
  return o;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string o = "\"";
  for (char c : s) o += c == '"' ? std::string("\"\"") : std::string(1, c);
  return o + "\"";
}

const char* kCsvHeader =
    "group,workload,unit,device,median,min,max,spread_pct,device_median,wall_ms,device_ms,runs,"
    "ceiling_share,speedup\n";

std::string fmt(double v) {
  char b[32];
  if (v < 0) return "-";
  if (v >= 1000)
    std::snprintf(b, sizeof b, "%.0f", v);
  else if (v >= 100)
    std::snprintf(b, sizeof b, "%.1f", v);
  else if (v >= 10)
    std::snprintf(b, sizeof b, "%.2f", v);
  else
    std::snprintf(b, sizeof b, "%.3f", v);
  return b;
}

}  // namespace

const Result* find_result(const Report& r, const std::string& workload, const std::string& device) {
  for (const Result& x : r.results)
    if (x.workload == workload && x.device == device) return &x;
  return nullptr;
}

void write_file(const std::string& path, const std::string& text, const char* what) {
  if (path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return;
  }
  // Atomic: a kill or a full disk leaves the previous report whole.
  files::write_atomic(path, text, (std::string("bench ") + what).c_str());
}

std::string to_json(const Report& r) {
  using nlohmann::ordered_json;
  // Six significant digits, as in the table; NaN and infinities as null.
  auto fig = [](double v) -> ordered_json {
    if (!std::isfinite(v)) return nullptr;
    return std::stod(num(v));
  };
  auto opt = [&](double v) -> ordered_json { return v < 0 ? ordered_json(nullptr) : fig(v); };
  ordered_json devices = ordered_json::array(), results = ordered_json::array();
  for (Device* d : r.devices) {
    auto c = r.ceilings.at(d->str());
    devices.push_back({{"device", d->str()},
                       {"backend", d->info().backend},
                       {"name", d->info().name},
                       {"type", device_type_name(d->info().type)},
                       {"ceilings", {{"gemm_gflops", fig(c.gflops)}, {"copy_gbs", fig(c.gbs)}}}});
  }
  for (const Result& x : r.results)
    results.push_back({{"group", x.group},
                       {"workload", x.workload},
                       {"unit", x.unit},
                       {"device", x.device},
                       {"median", fig(x.median)},
                       {"min", fig(x.min)},
                       {"max", fig(x.max)},
                       {"spread_pct", fig(x.median > 0 ? (x.max - x.min) / x.median * 100 : 0)},
                       {"device_median", opt(x.device_median)},
                       {"wall_ms", fig(x.wall_ms)},
                       {"device_ms", opt(x.device_ms)},
                       {"runs", x.runs},
                       {"ceiling_share", opt(x.share)},
                       {"ceiling", x.ceiling},
                       {"speedup", opt(x.speedup)}});
  ordered_json skipped = ordered_json::array();
  for (const auto& n : r.not_measured)
    skipped.push_back({{"workload", n.workload}, {"device", n.device}, {"reason", n.reason}});
  ordered_json out = {
      {"bench", "switchyard"}, {"quick", r.quick},          {"baseline", r.baseline},
      {"title", r.title},      {"seconds", fig(r.seconds)}, {"host_memcpy_gbs", fig(r.memcpy_gbs)},
      {"devices", devices},    {"results", results},        {"not_measured", skipped}};
  return out.dump(1) + "\n";
}

std::string to_csv(const Report& r) {
  std::ostringstream o;
  o << kCsvHeader;
  auto opt = [](double v) { return v < 0 ? std::string() : num(v); };
  for (const Result& x : r.results)
    o << csv_field(x.group) << "," << csv_field(x.workload) << "," << csv_field(x.unit) << ","
      << csv_field(x.device) << "," << num(x.median) << "," << num(x.min) << "," << num(x.max)
      << "," << num(x.median > 0 ? (x.max - x.min) / x.median * 100 : 0) << ","
      << opt(x.device_median) << "," << num(x.wall_ms) << "," << opt(x.device_ms) << "," << x.runs
      << "," << opt(x.share) << "," << opt(x.speedup) << "\n";
  return o.str();
}

std::vector<Result> from_csv(const std::string& text) {
  std::vector<Result> out;
  std::istringstream in(text);
  std::string line;
  bool header = false;
  while (std::getline(in, line)) {
    if (!header) {  // whatever comes before the header is not a row
      header = line + "\n" == kCsvHeader;
      continue;
    }
    std::vector<std::string> f;
    std::string cur;
    bool q = false;
    for (char c : line) {
      if (c == '"')
        q = !q;
      else if (c == ',' && !q)
        f.push_back(cur), cur.clear();
      else
        cur += c;
    }
    f.push_back(cur);
    if (f.size() != 14) continue;
    auto d = [](const std::string& s) { return s.empty() ? -1.0 : std::stod(s); };
    Result x;
    x.group = f[0], x.workload = f[1], x.unit = f[2], x.device = f[3];
    try {
      x.median = d(f[4]), x.min = d(f[5]), x.max = d(f[6]);
      x.device_median = d(f[8]), x.wall_ms = d(f[9]), x.device_ms = d(f[10]);
      x.runs = int(d(f[11]));
    } catch (const std::exception&) {
      continue;  // a malformed row is left out, not taken as a figure
    }
    out.push_back(x);
  }
  return out;
}

std::string to_table(const Report& r) {
  std::ostringstream o;
  char line[512];
  o << "\nceilings (measured once per device)\n";
  std::snprintf(line, sizeof line, "  %-34s", "");
  o << line;
  for (Device* d : r.devices) {
    std::snprintf(line, sizeof line, " %12s", d->str().c_str());
    o << line;
  }
  o << "\n";
  std::snprintf(line, sizeof line, "  %-34s", "compute: best GEMM (GFLOP/s)");
  o << line;
  for (Device* d : r.devices)
    o << " "
      << std::string(12 - std::min<size_t>(12, fmt(r.ceilings.at(d->str()).gflops).size()), ' ')
      << fmt(r.ceilings.at(d->str()).gflops);
  o << "\n";
  std::snprintf(line, sizeof line, "  %-34s", "bandwidth: device copy (GB/s)");
  o << line;
  for (Device* d : r.devices)
    o << " " << std::string(12 - std::min<size_t>(12, fmt(r.ceilings.at(d->str()).gbs).size()), ' ')
      << fmt(r.ceilings.at(d->str()).gbs);
  o << "\n";
  std::snprintf(line, sizeof line, "  %-34s %12s   (the ceiling for transfers)\n",
                "host memcpy (GB/s)", fmt(r.memcpy_gbs).c_str());
  o << line;

  // Per device: median, spread, device-time figure, share of ceiling, and
  // (besides the baseline) the speed-up.
  o << "\nmedian: from wall time; +-: (max - min) / median; device: from device time; "
       "peak: share of the ceiling; vs "
    << r.baseline << ": speed-up\n";
  std::snprintf(line, sizeof line, "%-38s %-9s", "workload", "unit");
  o << line;
  for (Device* d : r.devices) {
    bool base = d->str() == r.baseline;
    std::string h = "| " + d->str();
    std::snprintf(line, sizeof line, " %-*s", base ? 35 : 44, h.c_str());
    o << line;
  }
  o << "\n";
  std::snprintf(line, sizeof line, "%-38s %-9s", "", "");
  o << line;
  for (Device* d : r.devices) {
    bool base = d->str() == r.baseline;
    std::snprintf(line, sizeof line, " | %8s %5s %8s %6s", "median", "+-", "device", "peak");
    o << line;
    if (!base) {
      std::snprintf(line, sizeof line, " %8s", ("vs " + r.baseline).substr(0, 8).c_str());
      o << line;
    }
  }
  o << "\n";
  std::string group;
  for (const std::string& w : r.order) {
    const Result* any = nullptr;
    for (Device* d : r.devices)
      if (!any) any = find_result(r, w, d->str());
    if (!any) continue;
    if (any->group != group) {
      group = any->group;
      o << "-- " << group << "\n";
    }
    std::snprintf(line, sizeof line, "%-38s %-9s", w.substr(0, 38).c_str(), any->unit.c_str());
    o << line;
    for (Device* d : r.devices) {
      bool base = d->str() == r.baseline;
      const Result* x = find_result(r, w, d->str());
      if (!x) {
        std::snprintf(line, sizeof line, " | %8s %5s %8s %6s", "-", "", "-", "-");
        o << line;
        if (!base) o << std::string(9, ' ');
        continue;
      }
      char spread[16], share[16];
      std::snprintf(spread, sizeof spread, "%.0f%%",
                    x->median > 0 ? (x->max - x->min) / x->median * 100 : 0.0);
      if (x->share >= 0)
        std::snprintf(share, sizeof share, "%.0f%%", x->share * 100);
      else
        std::snprintf(share, sizeof share, "-");
      std::snprintf(line, sizeof line, " | %8s %5s %8s %6s", fmt(x->median).c_str(), spread,
                    fmt(x->device_median).c_str(), share);
      o << line;
      if (!base) {
        char sp[16] = "-";
        if (x->speedup >= 0) std::snprintf(sp, sizeof sp, "%.2fx", x->speedup);
        std::snprintf(line, sizeof line, " %8s", sp);
        o << line;
      }
    }
    o << "\n";
  }
  if (!r.not_measured.empty()) {
    o << "\nnot measured:\n";
    for (const auto& n : r.not_measured)
      o << "  " << n.workload << " on " << n.device << ": " << n.reason << "\n";
  }
  std::string text = o.str(), out;  // without the padding at line ends
  for (size_t b = 0; b < text.size();) {
    size_t e = text.find('\n', b);
    std::string line = text.substr(b, e - b);
    line.erase(line.find_last_not_of(' ') + 1);
    out += line + "\n";
    b = e + 1;
  }
  return out;
}

// A horizontal grouped bar chart: one group per workload, one bar per device,
// labelled with the figure itself. Units differ between sections (gemm,
// transfer, ...), so each bar's length is its throughput relative to the
// largest figure in its section.
std::string to_svg(const Report& r) {
  static const char* colors[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759",
                                 "#76b7b2", "#edc948", "#b07aa1"};
  const int W = 980, label_w = 300, chart_w = 520, bar_h = 14, bar_gap = 2, group_gap = 10;
  const int top = r.title.empty() ? 92 : 110;
  std::vector<std::string> ws;
  for (const std::string& w : r.order)
    for (Device* d : r.devices)
      if (find_result(r, w, d->str())) {
        ws.push_back(w);
        break;
      }
  const int nd = int(r.devices.size());
  const int group_h = nd * (bar_h + bar_gap) + group_gap;
  std::set<std::string> groups_seen;
  int headers = 0;
  {
    std::string g;
    for (const std::string& w : ws)
      for (Device* d : r.devices)
        if (const Result* x = find_result(r, w, d->str())) {
          if (x->group != g) g = x->group, headers++;
          break;
        }
  }
  const int H = top + int(ws.size()) * group_h + headers * 22 + 40;
  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" viewBox=\"0 0 " << W << " " << H
    << "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n"
    << "<rect x=\"0\" y=\"0\" width=\"" << W << "\" height=\"" << H << "\" fill=\"white\"/>\n"
    << "<text x=\"16\" y=\"26\" font-size=\"17\" font-weight=\"bold\">switchyard bench"
    << (r.quick ? " --quick" : "") << ": throughput per workload (longer is faster)</text>\n"
    << "<text x=\"16\" y=\"46\" fill=\"#555\">Bars are scaled to the largest figure in their "
       "section; the label "
       "is the median over runs, from wall time.</text>\n";
  const int legend_y = r.title.empty() ? 60 : 78;
  if (!r.title.empty())
    o << "<text x=\"16\" y=\"64\" font-weight=\"bold\" fill=\"#a33\">" << xml(r.title)
      << "</text>\n";
  for (int k = 0; k < nd; ++k) {
    int x = 16 + k * 300;
    o << "<rect x=\"" << x << "\" y=\"" << legend_y << "\" width=\"14\" height=\"14\" fill=\""
      << colors[k % 7] << "\"/>\n"
      << "<text x=\"" << x + 20 << "\" y=\"" << legend_y + 12 << "\">"
      << xml(r.devices[k]->str() + " (" + r.devices[k]->info().name.substr(0, 30) + ")")
      << "</text>\n";
  }
  int y = top;
  std::string group;
  for (const std::string& w : ws) {
    std::vector<const Result*> xs;
    double best = 0;
    for (Device* d : r.devices) {
      const Result* x = find_result(r, w, d->str());
      xs.push_back(x);
      if (x)
        for (const Result& y : r.results)
          if (y.group == x->group) best = std::max(best, y.median);
      if (x && x->group != group) {
        group = x->group;
        y += 6;
        o << "<text x=\"16\" y=\"" << y + 10 << "\" font-weight=\"bold\" fill=\"#333\">"
          << xml(group) << "</text>\n"
          << "<line x1=\"16\" y1=\"" << y + 14 << "\" x2=\"" << W - 16 << "\" y2=\"" << y + 14
          << "\" stroke=\"#ccc\"/>\n";
        y += 16;
      }
    }
    o << "<text x=\"" << label_w - 8 << "\" y=\"" << y + (nd * (bar_h + bar_gap)) / 2 + 4
      << "\" text-anchor=\"end\">" << xml(w) << "</text>\n";
    for (int k = 0; k < nd; ++k) {
      int by = y + k * (bar_h + bar_gap);
      const Result* x = xs[size_t(k)];
      if (!x) {
        o << "<text x=\"" << label_w + 4 << "\" y=\"" << by + 11 << "\" fill=\"#999\">n/a on "
          << xml(r.devices[size_t(k)]->str()) << "</text>\n";
        continue;
      }
      double len = best > 0 ? x->median / best * chart_w : 0;
      o << "<rect class=\"bar\" data-device=\"" << xml(x->device) << "\" data-workload=\"" << xml(w)
        << "\" x=\"" << label_w << "\" y=\"" << by << "\" width=\"" << num(std::max(len, 1.0), 3)
        << "\" height=\"" << bar_h << "\" fill=\"" << colors[k % 7] << "\"><title>"
        << xml(x->device + ": " + fmt(x->median) + " " + x->unit) << "</title></rect>\n"
        << "<text x=\"" << label_w + int(len) + 6 << "\" y=\"" << by + 11 << "\" font-size=\"11\">"
        << xml(fmt(x->median) + " " + x->unit) << "</text>\n";
    }
    y += group_h;
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace switchyard::bench
