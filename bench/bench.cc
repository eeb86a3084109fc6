#include "bench/bench.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <utility>

namespace baregrad::bench {
namespace {

std::vector<Bench>& registry() {
  static std::vector<Bench> benches;
  return benches;
}

double now_ms() {
  auto since_epoch = std::chrono::steady_clock::now().time_since_epoch();
  return std::chrono::duration<double, std::milli>(since_epoch).count();
}

// Warm-up run, then timed runs until both minimums are met; returns the samples, sorted.
std::vector<double> sorted_samples_ms(const std::function<void()>& fn,
                                      int min_reps,
                                      double min_total_ms) {
  fn();
  std::vector<double> samples;
  double total_ms = 0;
  while (static_cast<int>(samples.size()) < std::max(min_reps, 1) || total_ms < min_total_ms) {
    double start = now_ms();
    fn();
    double ms = now_ms() - start;
    samples.push_back(ms);
    total_ms += ms;
  }
  std::sort(samples.begin(), samples.end());
  return samples;
}

// Fixed-point with about four significant digits: 1234, 148.2, 12.34, 0.123.
std::string format_value(double v) {
  std::array<char, 64> buf{};
  double mag = std::fabs(v);
  const char* fmt = mag >= 1000 ? "%.0f" : mag >= 100 ? "%.1f" : mag >= 1 ? "%.2f" : "%.3g";
  std::snprintf(buf.data(), buf.size(), fmt, v);
  return buf.data();
}

void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          std::array<char, 8> buf{};
          std::snprintf(buf.data(), buf.size(), "\\u%04x", static_cast<unsigned>(c));
          out += buf.data();
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

void append_json_number(std::string& out, std::optional<double> v) {
  if (!v || !std::isfinite(*v)) {
    out += "null";
    return;
  }
  std::array<char, 64> buf{};
  auto res = std::to_chars(buf.data(), buf.data() + buf.size(), *v, std::chars_format::general, 7);
  out.append(buf.data(), res.ptr);
}

// "148.2 (0.95x OpenBLAS)": the reference value and how much better the row is than it.
std::string format_ref(const Row& row) {
  if (!row.ref_value) return row.ref.value_or("");
  std::string s = format_value(*row.ref_value);
  double ref = *row.ref_value;
  double ratio = is_time_unit(row.unit) ? ref / row.value : row.value / ref;
  if (std::isfinite(ratio) && ref > 0 && row.value > 0) {
    std::array<char, 32> buf{};
    std::snprintf(buf.data(), buf.size(), " (%.2fx", ratio);
    s += buf.data();
    s += row.ref ? " " + *row.ref + ")" : ")";
  } else if (row.ref) {
    s += " (" + *row.ref + ")";
  }
  return s;
}

}  // namespace

void register_bench(std::string name, BenchFn fn, std::string help) {
  registry().push_back({std::move(name), std::move(help), std::move(fn)});
}

const std::vector<Bench>& registered_benches() { return registry(); }

double time_median_ms(const std::function<void()>& fn, int min_reps, double min_total_ms) {
  std::vector<double> s = sorted_samples_ms(fn, min_reps, min_total_ms);
  size_t mid = s.size() / 2;
  return s.size() % 2 == 1 ? s[mid] : 0.5 * (s[mid - 1] + s[mid]);
}

double time_best_ms(const std::function<void()>& fn, int min_reps, double min_total_ms) {
  return sorted_samples_ms(fn, min_reps, min_total_ms).front();
}

std::optional<double> pct_of(double value, double peak) {
  if (!(peak > 0)) return std::nullopt;
  return 100.0 * value / peak;
}

bool is_time_unit(std::string_view unit) {
  return unit == "s" || unit == "ms" || unit == "us" || unit == "ns";
}

std::string format_table(const std::vector<Row>& rows) {
  const std::array<std::string, 6> header = {"name",  "device", "metric",
                                             "value", "% peak", "reference"};
  std::vector<std::array<std::string, 6>> cells;
  cells.push_back(header);
  for (const Row& r : rows) {
    std::string pct = r.peak_pct ? format_value(*r.peak_pct) + "%" : "-";
    std::string ref = format_ref(r);
    cells.push_back({r.name, r.device, r.metric, format_value(r.value) + " " + r.unit, pct,
                     ref.empty() ? "-" : ref});
  }
  std::array<size_t, 6> width{};
  for (const auto& line : cells) {
    for (size_t i = 0; i < line.size(); ++i) width[i] = std::max(width[i], line[i].size());
  }
  std::ostringstream os;
  for (size_t row = 0; row < cells.size(); ++row) {
    std::string line;
    for (size_t i = 0; i < header.size(); ++i) {
      const std::string& cell = cells[row][i];
      // Numbers (value, % peak) are right-aligned; text is left-aligned.
      bool right = i == 3 || i == 4;
      std::string pad(width[i] - cell.size(), ' ');
      line += right ? pad + cell : cell + pad;
      line += "  ";
    }
    if (row > 0 && !rows[row - 1].note.empty()) line += rows[row - 1].note;
    while (!line.empty() && line.back() == ' ') line.pop_back();
    os << line << '\n';
  }
  return os.str();
}

std::string json_line(const Row& row) {
  std::string out = "{\"name\":";
  append_json_string(out, row.name);
  out += ",\"device\":";
  append_json_string(out, row.device);
  out += ",\"metric\":";
  append_json_string(out, row.metric);
  out += ",\"value\":";
  append_json_number(out, row.value);
  out += ",\"unit\":";
  append_json_string(out, row.unit);
  out += ",\"peak_pct\":";
  append_json_number(out, row.peak_pct);
  out += ",\"ref\":";
  if (row.ref) {
    append_json_string(out, *row.ref);
  } else {
    out += "null";
  }
  out += ",\"ref_value\":";
  append_json_number(out, row.ref_value);
  out += '}';
  return out;
}

std::optional<double> python_reference(const std::string& script, const std::string& args) {
  std::string cmd =
      "/usr/bin/python3 " + script + (args.empty() ? "" : " " + args) + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return std::nullopt;
  char buf[64] = {};
  bool got = std::fgets(buf, sizeof(buf), p) != nullptr;
  int rc = pclose(p);
  if (!got || rc != 0) return std::nullopt;
  return std::strtod(buf, nullptr);
}

}  // namespace baregrad::bench
