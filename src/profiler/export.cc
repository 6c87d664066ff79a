// Profile exports (see export.h).
#include "profiler/export.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace roofline {

namespace {

// Text safe inside SVG elements and attributes.
std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\t') out += c;
    }
  }
  return out;
}

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

// A fixed palette, assigned to op kinds in sorted order so a kind keeps its colour across charts.
const char* colour(size_t i) {
  static const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                   "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  return kPalette[i % (sizeof(kPalette) / sizeof(kPalette[0]))];
}

}  // namespace

std::string roofline_svg(const ProfileReport& report, const std::vector<CallModel>& calls,
                         const Ceilings& ceilings) {
  // Per op kind: the model's bytes and FLOPs per step, the measured time per step.
  struct Point {
    double bytes = 0, flops = 0, measured_ns = 0;
  };
  std::map<std::string, Point> ops;
  for (const CallModel& c : calls) {
    ops[c.op].bytes += c.bytes;
    ops[c.op].flops += c.flops;
  }
  for (const auto& row : report.per_op) ops[row.op].measured_ns = row.measured_ns;

  constexpr double kW = 760, kH = 480, kLeft = 80, kRight = 220, kTop = 40, kBottom = 60;
  const double plot_w = kW - kLeft - kRight, plot_h = kH - kTop - kBottom;
  // Axes: intensity 1e-2 .. 1e4 FLOP/byte, throughput from peak / 1e6 to 2 x peak.
  const double x_lo = std::log10(1e-2), x_hi = std::log10(1e4);
  const double y_hi = std::log10(ceilings.flops_per_s * 2), y_lo = y_hi - 6.3;
  auto px = [&](double intensity) {
    return kLeft + (std::log10(intensity) - x_lo) / (x_hi - x_lo) * plot_w;
  };
  auto py = [&](double flops_per_s) {
    return kTop + (y_hi - std::log10(flops_per_s)) / (y_hi - y_lo) * plot_h;
  };
  const double ridge = ceilings.flops_per_s / ceilings.bytes_per_s;

  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kW << "\" height=\"" << kH
    << "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  o << "<title>roofline: attained FLOP/s against arithmetic intensity, per op</title>\n";
  o << "<rect x=\"0\" y=\"0\" width=\"" << kW << "\" height=\"" << kH << "\" fill=\"white\"/>\n";
  o << "<rect x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << plot_w << "\" height=\""
    << plot_h << "\" fill=\"none\" stroke=\"#999\"/>\n";
  // Decade grid and labels.
  for (int e = static_cast<int>(std::ceil(x_lo)); e <= static_cast<int>(std::floor(x_hi)); ++e) {
    const double x = px(std::pow(10.0, e));
    o << "<line class=\"grid\" x1=\"" << x << "\" y1=\"" << kTop << "\" x2=\"" << x << "\" y2=\""
      << kTop + plot_h << "\" stroke=\"#eee\"/><text x=\"" << x << "\" y=\"" << kTop + plot_h + 14
      << "\" text-anchor=\"middle\">1e" << e << "</text>\n";
  }
  for (int e = static_cast<int>(std::ceil(y_lo)); e <= static_cast<int>(std::floor(y_hi)); ++e) {
    const double y = py(std::pow(10.0, e));
    o << "<line class=\"grid\" x1=\"" << kLeft << "\" y1=\"" << y << "\" x2=\"" << kLeft + plot_w
      << "\" y2=\"" << y << "\" stroke=\"#eee\"/><text x=\"" << kLeft - 6 << "\" y=\"" << y + 4
      << "\" text-anchor=\"end\">1e" << e << "</text>\n";
  }
  o << "<text x=\"" << kLeft + plot_w / 2 << "\" y=\"" << kH - 20
    << "\" text-anchor=\"middle\">arithmetic intensity (FLOP per byte of the cost model)</text>\n";
  o << "<text x=\"16\" y=\"" << kTop + plot_h / 2 << "\" transform=\"rotate(-90 16 "
    << kTop + plot_h / 2 << ")\" text-anchor=\"middle\">attained FLOP/s</text>\n";
  // The two ceilings: bandwidth x intensity up to the ridge, then the peak.
  const double x0 = std::pow(10.0, x_lo), x1 = std::pow(10.0, x_hi);
  const double bw_start = std::max(x0, std::pow(10.0, y_lo) / ceilings.bytes_per_s);
  o << "<polyline class=\"ceiling\" fill=\"none\" stroke=\"black\" stroke-width=\"2\" points=\""
    << px(bw_start) << "," << py(bw_start * ceilings.bytes_per_s) << " " << px(ridge) << ","
    << py(ceilings.flops_per_s) << " " << px(x1) << "," << py(ceilings.flops_per_s) << "\"/>\n";
  o << "<text x=\"" << px(ridge) + 6 << "\" y=\"" << py(ceilings.flops_per_s) - 6 << "\">peak "
    << fmt("%.0f", ceilings.flops_per_s / 1e12) << " TFLOP/s; bandwidth "
    << fmt("%.2f", ceilings.bytes_per_s / 1e12) << " TB/s</text>\n";
  // Points, and a legend on the right; ops without FLOPs go to the legend only.
  double legend_y = kTop + 10;
  size_t index = 0;
  for (const auto& [op, p] : ops) {
    const char* c = colour(index++);
    const double seconds = p.measured_ns * 1e-9;
    std::string label = xml_escape(op.empty() ? "(unattributed)" : op);
    if (p.flops > 0 && p.bytes > 0 && seconds > 0) {
      const double intensity = std::clamp(p.flops / p.bytes, x0, x1);
      const double attained =
          std::clamp(p.flops / seconds, std::pow(10.0, y_lo), std::pow(10.0, y_hi));
      const double roof = std::min(ceilings.flops_per_s, intensity * ceilings.bytes_per_s);
      o << "<circle class=\"op\" cx=\"" << px(intensity) << "\" cy=\"" << py(attained)
        << "\" r=\"5\" fill=\"" << c << "\"><title>" << label << ": "
        << fmt("%.3g", p.flops / p.bytes) << " FLOP/B, " << fmt("%.3g", p.flops / seconds / 1e12)
        << " TFLOP/s = " << fmt("%.1f", 100 * p.flops / seconds / roof)
        << " % of its roof</title></circle>\n";
      label += " " + fmt("%.1f", 100 * p.flops / seconds / roof) + " % of roof";
    } else if (seconds > 0) {
      label += " (no FLOPs) " + fmt("%.0f", p.bytes / seconds / 1e9) + " GB/s";
    }
    o << "<circle cx=\"" << kW - kRight + 16 << "\" cy=\"" << legend_y - 4 << "\" r=\"4\" fill=\""
      << c << "\"/><text class=\"legend\" x=\"" << kW - kRight + 26 << "\" y=\"" << legend_y
      << "\">" << label << "</text>\n";
    legend_y += 16;
  }
  o << "</svg>\n";
  return o.str();
}

std::string timeline_svg(const std::vector<TraceEvent>& all, int step) {
  std::vector<const TraceEvent*> events;
  for (const TraceEvent& e : all)
    if (e.step == step) events.push_back(&e);
  if (events.empty())
    for (const TraceEvent& e : all) events.push_back(&e);
  int64_t t0 = 0, t1 = 1;
  std::set<int> streams;
  std::set<std::string> kinds;
  if (!events.empty()) {
    t0 = events.front()->start_ns;
    t1 = events.front()->end_ns;
  }
  for (const TraceEvent* e : events) {
    t0 = std::min(t0, e->start_ns);
    t1 = std::max(t1, std::max(e->end_ns, e->start_ns));
    streams.insert(e->stream);
    kinds.insert(e->op);
  }
  if (t1 <= t0) t1 = t0 + 1;
  std::map<std::string, const char*> colours;
  size_t i = 0;
  for (const std::string& k : kinds) colours[k] = colour(i++);
  std::map<int, int> row;
  for (int s : streams) row[s] = static_cast<int>(row.size());

  constexpr double kW = 1000, kLeft = 70, kRight = 20, kTop = 30, kRowH = 28, kLegendH = 24;
  const double plot_w = kW - kLeft - kRight;
  const double h = kTop + kRowH * static_cast<double>(std::max<size_t>(1, streams.size())) + 30 +
                   kLegendH * std::ceil(static_cast<double>(kinds.size()) / 5.0);
  auto px = [&](int64_t t) {
    return kLeft + static_cast<double>(t - t0) / static_cast<double>(t1 - t0) * plot_w;
  };
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kW << "\" height=\"" << h
    << "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  o << "<title>timeline of step " << step << ": " << events.size() << " device intervals over "
    << fmt("%.1f", static_cast<double>(t1 - t0) / 1e3) << " us</title>\n";
  o << "<rect x=\"0\" y=\"0\" width=\"" << kW << "\" height=\"" << h << "\" fill=\"white\"/>\n";
  for (const auto& [s, r] : row)
    o << "<text x=\"" << kLeft - 6 << "\" y=\"" << kTop + r * kRowH + kRowH / 2 + 4
      << "\" text-anchor=\"end\">stream " << s << "</text>\n";
  for (const TraceEvent* e : events) {
    const double x = px(e->start_ns);
    const double w = std::max(0.5, px(std::max(e->end_ns, e->start_ns)) - x);
    const double y = kTop + row[e->stream] * kRowH + 3;
    o << "<rect class=\"event\" x=\"" << x << "\" y=\"" << y << "\" width=\"" << w << "\" height=\""
      << kRowH - 6 << "\" fill=\"" << colours[e->op] << "\"><title>" << xml_escape(e->name) << " ("
      << xml_escape(e->op)
      << "): " << fmt("%.2f", static_cast<double>(e->end_ns - e->start_ns) / 1e3)
      << " us</title></rect>\n";
  }
  const double axis_y =
      kTop + kRowH * static_cast<double>(std::max<size_t>(1, streams.size())) + 14;
  o << "<text x=\"" << kLeft << "\" y=\"" << axis_y << "\">0 us</text><text x=\"" << kLeft + plot_w
    << "\" y=\"" << axis_y << "\" text-anchor=\"end\">"
    << fmt("%.1f", static_cast<double>(t1 - t0) / 1e3) << " us</text>\n";
  i = 0;
  for (const auto& [k, c] : colours) {
    const double lx = kLeft + static_cast<double>(i % 5) * 180,
                 ly = axis_y + 20 + static_cast<double>(i / 5) * kLegendH;
    o << "<rect x=\"" << lx << "\" y=\"" << ly - 9 << "\" width=\"10\" height=\"10\" fill=\"" << c
      << "\"/><text x=\"" << lx + 14 << "\" y=\"" << ly << "\">"
      << xml_escape(k.empty() ? "(unattributed)" : k) << "</text>\n";
    ++i;
  }
  o << "</svg>\n";
  return o.str();
}

std::string report_json(const ProfileReport& r, const Ceilings& ceilings,
                        const CaptureSummary* capture) {
  using nlohmann::json;
  auto rows = [](const std::vector<ProfileReport::SolRow>& v) {
    json a = json::array();
    for (const auto& x : v)
      a.push_back({{"name", x.name},
                   {"op", x.op},
                   {"measured_ns", x.measured_ns},
                   {"ideal_ns", x.ideal_ns},
                   {"excess_ns", x.excess_ns}});
    return a;
  };
  json kernels = json::array();
  for (const auto& k : r.top_kernels)
    kernels.push_back({{"name", k.name},
                       {"op", k.op},
                       {"calls", k.calls},
                       {"total_ns", k.total_ns},
                       {"share", k.share},
                       {"expected_share", k.expected_share},
                       {"unexpected", k.unexpected}});
  json histogram = json::array();
  for (const auto& [bound, n] : r.gap_histogram)
    histogram.push_back(
        {{"le_us", std::isfinite(bound) ? json(bound) : json("inf")}, {"count", n}});
  json j = {
      {"ceilings", {{"bytes_per_s", ceilings.bytes_per_s}, {"flops_per_s", ceilings.flops_per_s}}},
      {"num_steps", r.num_steps},
      {"total_ns", r.total_ns},
      {"busy_ns", r.busy_ns},
      {"busy_fraction", r.busy_fraction},
      {"step_busy_fraction", r.step_busy_fraction},
      {"gap_ns", r.gap_ns},
      {"gap_histogram", histogram},
      {"small_gap_ns", r.small_gap_ns},
      {"comm_ns", r.comm_ns},
      {"comm_hidden_ns", r.comm_hidden_ns},
      {"comm_overlap_fraction", r.comm_overlap_fraction},
      {"top_kernels", kernels},
      {"per_call", rows(r.per_call)},
      {"per_op", rows(r.per_op)},
      {"ideal_step_ns", r.ideal_step_ns},
      {"measured_step_ns", r.measured_step_ns},
      {"launch_gap_ns", r.launch_gap_ns},
      {"other_gap_ns", r.other_gap_ns},
      {"unattributed_ns", r.unattributed_ns},
      {"speed_of_light_fraction",
       r.measured_step_ns > 0 ? r.ideal_step_ns / r.measured_step_ns : 0.0}};
  j["ceilings"]["handover_ns"] = ceilings.handover_ns;
  j["ceilings"]["handover_calibrated"] = ceilings.handover_calibrated;
  j["kernels_per_step"] = r.kernels_per_step;
  j["handover_floor_ns"] = r.handover_floor_ns;
  if (capture != nullptr) {
    const CaptureSummary& c = *capture;
    const bool untraced = c.ms_per_step_untraced > 0;
    const json step_overhead =
        untraced ? json(c.ms_per_step / c.ms_per_step_untraced - 1.0) : json();
    const double window_untraced_ms = c.window_ms - c.window_extra_ms;
    const json overhead =
        c.sampled ? (window_untraced_ms > 0 ? json(c.window_extra_ms / window_untraced_ms) : json())
                  : step_overhead;
    j["capture"] = {{"method", c.method},
                    {"cuda_graphs", c.cuda_graphs},
                    {"sampled", c.sampled},
                    {"traced_steps", c.traced_steps},
                    {"steps_joined", c.steps_joined},
                    {"steps_unmatched", c.steps_unmatched},
                    {"dropped_records", c.dropped_records},
                    {"ms_per_step", c.ms_per_step},
                    {"ms_per_step_untraced", untraced ? json(c.ms_per_step_untraced) : json()},
                    {"ms_per_step_graph_floor",
                     c.ms_per_step_graph_floor > 0 ? json(c.ms_per_step_graph_floor) : json()},
                    {"untraced_replays", c.untraced_replays},
                    {"window_ms", c.window_ms},
                    {"window_extra_ms", c.window_extra_ms},
                    {"overhead_budget", c.overhead_budget},
                    {"overhead", overhead},
                    {"step_overhead", step_overhead}};
  }
  return j.dump(2);
}

}  // namespace roofline
