// Inline SVG line charts for the console's front page: no script, no external file, nothing from the network.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "console/html.hpp"

namespace outboxd::console {

struct Series {
  std::string name;
  std::string color;  // a literal of ours, e.g. "#1f6feb"; never from a row
  std::vector<std::pair<double, double>> points;  // (seconds before now, 0 or less; value), oldest first
};

// A chart of `span` seconds up to now, the y axis from 0 to the largest
// value (at least 1), labelled with it and with the series' names; an empty
// series draws nothing. `title` is escaped.
Html line_chart(std::string_view title, const std::vector<Series>& series, double span, int width = 360,
                int height = 90);

}  // namespace outboxd::console
