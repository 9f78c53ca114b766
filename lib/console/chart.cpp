// Polylines in an SVG viewBox: the shape of a backlog or a rate over the last hour.
#include "console/chart.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace outboxd::console {

namespace {

constexpr int kLeft = 40;   // room for the y label
constexpr int kTop = 16;    // room for the title and legend
constexpr int kBottom = 14; // room for the x labels

std::string number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f", value);
  return buffer;
}

std::string y_label(double value) {
  if (value >= 1e6) return number(value / 1e6) + "M";
  if (value >= 1e4) return number(value / 1e3) + "k";
  return value == std::floor(value) ? std::to_string(static_cast<long long>(value)) : number(value);
}

}  // namespace

Html line_chart(std::string_view title, const std::vector<Series>& series, double span, int width, int height) {
  double top = 1;
  for (const Series& s : series) {
    for (const auto& point : s.points) top = std::max(top, point.second);
  }
  const double plot_w = width - kLeft - 4;
  const double plot_h = height - kTop - kBottom;
  const auto x_of = [&](double ago) { return kLeft + plot_w * (1 + std::clamp(ago, -span, 0.0) / span); };
  const auto y_of = [&](double v) { return kTop + plot_h * (1 - std::max(v, 0.0) / top); };

  const std::string w = std::to_string(width);
  const std::string h = std::to_string(height);
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" width=\"" + w + "\" height=\"" + h +
                    "\" viewBox=\"0 0 " + w + " " + h + "\" role=\"img\" aria-label=\"" + escape(title) +
                    "\"><title>" + escape(title) + "</title>";
  svg += "<text x=\"" + std::to_string(kLeft) + "\" y=\"11\" font-size=\"11\">" + escape(title) + "</text>";
  double legend_x = width - 4;
  for (auto s = series.rbegin(); s != series.rend(); ++s) {
    svg += "<text x=\"" + number(legend_x) + "\" y=\"11\" font-size=\"10\" text-anchor=\"end\" fill=\"" +
           escape(s->color) + "\">" + escape(s->name) + "</text>";
    legend_x -= 7.0 * static_cast<double>(s->name.size()) + 10;
  }
  svg += "<line x1=\"" + std::to_string(kLeft) + "\" y1=\"" + number(kTop + plot_h) + "\" x2=\"" +
         number(kLeft + plot_w) + "\" y2=\"" + number(kTop + plot_h) + "\" stroke=\"#888\"/>";
  svg += "<line x1=\"" + std::to_string(kLeft) + "\" y1=\"" + std::to_string(kTop) + "\" x2=\"" +
         std::to_string(kLeft) + "\" y2=\"" + number(kTop + plot_h) + "\" stroke=\"#888\"/>";
  svg += "<text x=\"" + std::to_string(kLeft - 3) + "\" y=\"" + std::to_string(kTop + 8) +
         "\" font-size=\"10\" text-anchor=\"end\">" + y_label(top) + "</text>";
  svg += "<text x=\"" + std::to_string(kLeft - 3) + "\" y=\"" + number(kTop + plot_h) +
         "\" font-size=\"10\" text-anchor=\"end\">0</text>";
  svg += "<text x=\"" + std::to_string(kLeft) + "\" y=\"" + std::to_string(height - 2) + "\" font-size=\"10\">-" +
         std::to_string(static_cast<long long>(span / 60)) + " min</text>";
  svg += "<text x=\"" + number(kLeft + plot_w) + "\" y=\"" + std::to_string(height - 2) +
         "\" font-size=\"10\" text-anchor=\"end\">now</text>";
  for (const Series& s : series) {
    if (s.points.empty()) continue;
    std::string points;
    for (const auto& [ago, value] : s.points) points += number(x_of(ago)) + "," + number(y_of(value)) + " ";
    points.pop_back();
    svg += "<polyline fill=\"none\" stroke-width=\"1.5\" stroke=\"" + escape(s.color) + "\" points=\"" + points + "\"/>";
  }
  svg += "</svg>";
  return {svg};
}

}  // namespace outboxd::console
