//===- GraphJsonTest.cpp - Reading node-link JSON graphs ------------------===//

#include "memopt/Remat/GraphJson.h"

#include <gtest/gtest.h>

using namespace memopt::remat;

namespace {

TEST(GraphJsonTest, ReadsCheckmateLayout) {
  Graph graph;
  std::string error;
  ASSERT_TRUE(readGraphJson(
      R"({"nodes": [{"id": 5, "name": "b", "cost_cpu": 2, "cost_ram": 8},
                    {"id": 3, "name": "a", "cost_cpu": 1, "cost_ram": 4}],
          "links": [{"source": 3, "target": 5}, {"source": 3, "target": 5}]})",
      graph, error))
      << error;
  ASSERT_EQ(graph.nodes.size(), 2u);
  EXPECT_EQ(graph.nodes[0].name, "b");
  EXPECT_EQ(graph.nodes[0].bytes, 8);
  // The order is the ids in increasing order; repeated links count once.
  EXPECT_EQ(graph.order, (std::vector<int>{1, 0}));
  EXPECT_EQ(graph.inputs[0], (std::vector<int>{1}));
}

TEST(GraphJsonTest, ReadsRandomLayeredLayout) {
  Graph graph;
  std::string error;
  ASSERT_TRUE(readGraphJson(
      R"({"graph": {"order": [0, 2, 1]},
          "nodes": [{"name": 0, "duration": 0, "out_cost": 7},
                    {"name": 1, "duration": 3, "out_cost": 1,
                     "max_computations": 1},
                    {"name": 2, "duration": 2, "out_cost": 5}],
          "links": [{"0": 0, "1": 2}, {"0": 2, "1": 1}]})",
      graph, error))
      << error;
  EXPECT_EQ(graph.order, (std::vector<int>{0, 2, 1}));
  EXPECT_EQ(graph.nodes[1].maxComputations, 1);
  EXPECT_EQ(graph.nodes[2].cost, 2);
}

TEST(GraphJsonTest, ReportsErrors) {
  Graph graph;
  std::string error;
  EXPECT_FALSE(readGraphJson("{\"nodes\": [", graph, error));
  EXPECT_NE(error.find("malformed JSON"), std::string::npos) << error;
  EXPECT_FALSE(readGraphJson(
      R"({"nodes": [{"id": 0, "cost_cpu": 1, "cost_ram": 1},
                    {"id": 1, "cost_cpu": 1, "cost_ram": 1}],
          "links": [{"source": 0, "target": 1}, {"source": 1, "target": 0}]})",
      graph, error));
  EXPECT_NE(error.find("cycle"), std::string::npos) << error;
  EXPECT_FALSE(readGraphJson(
      R"({"nodes": [{"id": 0, "cost_cpu": 1, "cost_ram": 1}],
          "links": [{"source": 0, "target": 9}]})",
      graph, error));
  EXPECT_NE(error.find("unknown node id 9"), std::string::npos) << error;
}

} // namespace
