#include "recipes/tune_search.h"

#include <functional>
#include <map>

#include <gtest/gtest.h>

#include "base/error.h"

namespace onebit {
namespace {

// A machine made of numbers: each configuration's speed is a function of its engine arguments,
// every measurement takes `cost_s` of a fake clock, and its samples land in the record as a real
// measurement's would.
struct FakeMachine {
  std::function<double(const std::string& args)> decode = [](const std::string&) { return 100.0; };
  std::function<double(const std::string& args)> prompt = [](const std::string&) { return 1000.0; };
  std::function<std::string(const std::string& args)> answer = [](const std::string&) { return "same"; };
  std::function<bool(const std::string& args)> broken = [](const std::string&) { return false; };
  std::function<bool(const std::string& args)> slow = [](const std::string&) { return false; };  // 20 times the cost
  double jitter = 0;  // relative, up in odd rounds and down in even ones: the noise of the run
  double cost_s = 10;
  double now = 0;
  int measurements = 0;
  std::vector<std::string> log;  // "config round"
  BenchRecord record;

  TuneMeasure measure() {
    return [this](const BenchConfig& c, int round, const std::string&, double limit) {
      std::string args;
      for (const auto& a : c.args) args += a + " ";
      for (const auto& [k, v] : c.env) args += k + "=" + v + " ";
      if (broken(args)) throw Error("config " + c.name + ": serve exited with code 1");
      const double cost = slow(args) ? 20 * cost_s : cost_s;
      if (limit > 0 && cost > limit) {
        now += limit;
        throw Error("config " + c.name + " took longer than its limit");
      }
      ++measurements;
      now += cost;
      log.push_back(c.name + " " + std::to_string(round));
      const double j = 1 + jitter * (round % 2 ? 1 : -1);
      for (const char* m : {"decode-code", "decode-prose", "decode-short"}) record.samples.push_back({c.name, round, m, decode(args) * j});
      record.samples.push_back({c.name, round, "prompt", prompt(args) * j});
      record.samples.push_back({c.name, round, "ttft", 1000.0});
      for (const char* p : {"decode-code", "decode-prose", "decode-short"}) record.answers.push_back({c.name, round, p, answer(args)});
    };
  }
  std::function<double()> clock() {
    return [this] { return now; };
  }
};

SearchKnob knob(const std::string& id, const std::vector<std::string>& values, bool changes_output = false) {
  SearchKnob k{id, id, {}, changes_output};
  for (const auto& v : values) k.values.push_back(parse_setting(v, v, EngineArgs::builtin()));
  return k;
}

TuneSearchResult search(FakeMachine& m, std::vector<SearchKnob> knobs, double budget_s = 1e6,
                        TuneGoal goal = TuneGoal::kChat, std::vector<std::string> launch = {"--", "-t", "1"}) {
  TuneSearchOptions o;
  o.launch = {"current", {}, launch};
  o.knobs = std::move(knobs);
  o.budget_s = budget_s;
  o.goal = goal;
  std::atomic<bool> stop{false};
  return tune_search(o, m.record, m.measure(), m.clock(), [](const std::string&) {}, stop, EngineArgs::builtin());
}

bool has(const std::string& args, const std::string& words) { return args.find(words) != std::string::npos; }

}  // namespace

TEST(TuneSearch, FindsTheFasterValueAndKeepsItForTheNextKnob) {
  FakeMachine m;
  m.decode = [](const std::string& a) { return (has(a, "-t 2") ? 180.0 : 100.0) * (has(a, "-ub 256") ? 1.1 : 1.0); };
  TuneSearchResult r = search(m, {knob("threads", {"-t 2", "-t 1"}), knob("ubatch", {"-ub 256", "-ub 1024"})});
  ASSERT_EQ(r.knobs.size(), 2u);
  // -t 1 is the launch already: only -t 2 runs.
  ASSERT_EQ(r.knobs[0].candidates.size(), 1u);
  EXPECT_EQ(r.knobs[0].candidates[0].decision, "wins");
  EXPECT_EQ(r.knobs[0].candidates[0].rounds, 2);  // a clear win needs no third round
  // The next knob's base is the winner: ubatch is measured on top of -t 2.
  EXPECT_EQ(r.knobs[1].base.label(), "-t 2");
  EXPECT_EQ(r.best.label(), "-t 2 -ub 256");
  EXPECT_EQ(r.knobs[1].candidates[1].decision, "no win");
  EXPECT_FALSE(r.budget_spent);
}

TEST(TuneSearch, ClearLosersGoAfterOneRoundAndCloseCallsGetMoreRounds) {
  FakeMachine m;
  m.jitter = 0.02;  // a 4% spread: noise 2%
  m.decode = [](const std::string& a) { return has(a, "-ub 128") ? 50.0 : has(a, "-ub 256") ? 101.8 : 100.0; };
  TuneSearchResult r = search(m, {knob("ubatch", {"-ub 128", "-ub 256"})});
  const KnobRun& k = r.knobs[0];
  EXPECT_EQ(k.candidates[0].decision, "clearly worse");
  EXPECT_EQ(k.candidates[0].rounds, 1);
  // Decode +1.8% (goal +1.35%): above the 1% floor after two rounds, so a third runs; there the
  // rounds' own spread (a 95% interval of about 5%) leaves it hopeless.
  EXPECT_EQ(k.candidates[1].rounds, 3);
  EXPECT_EQ(k.candidates[1].decision, "no win");
  EXPECT_EQ(k.winner, -1);
  EXPECT_TRUE(r.best.empty());
}

TEST(TuneSearch, TheBudgetStopsItWithinOneMeasurement) {
  FakeMachine m;
  m.decode = [](const std::string& a) { return has(a, "-t 2") ? 180.0 : 100.0; };
  TuneSearchResult r = search(m, {knob("threads", {"-t 2"}), knob("ubatch", {"-ub 256", "-ub 1024", "-ub 2048"})}, 65);
  EXPECT_TRUE(r.budget_spent);
  EXPECT_LE(m.now, 65 + m.cost_s);
  // What was decided before the budget ran out is kept.
  EXPECT_EQ(r.best.label(), "-t 2");
  // ubatch's first round was cut short: one value measured once, undecided; the others never.
  const KnobRun& ub = r.knobs.back();
  EXPECT_EQ(ub.candidates[0].decision, "undecided: the budget was spent");
  EXPECT_EQ(ub.candidates[0].rounds, 1);
  EXPECT_EQ(ub.candidates[2].decision, "not measured: the budget was spent");
}

TEST(TuneSearch, AnOutputChangingValueMustKeepTheAnswers) {
  FakeMachine m;
  m.decode = [](const std::string& a) { return has(a, "q8_0") ? 150.0 : 100.0; };
  m.answer = [](const std::string& a) { return has(a, "q8_0") ? "other" : "same"; };
  TuneSearchResult r = search(m, {knob("kv-cache-type", {"-ctk q8_0 -ctv q8_0"}, true)});
  EXPECT_EQ(r.knobs[0].candidates[0].decision, "changes the greedy output");
  EXPECT_EQ(r.knobs[0].winner, -1);
  // The same speed-up with the same answers is kept.
  FakeMachine same;
  same.decode = m.decode;
  EXPECT_EQ(search(same, {knob("kv-cache-type", {"-ctk q8_0 -ctv q8_0"}, true)}).best.label(), "-ctk q8_0 -ctv q8_0");
}

TEST(TuneSearch, AGoalDecidesATradeOff) {
  FakeMachine chat, prompt;
  for (FakeMachine* m : {&chat, &prompt}) {
    m->decode = [](const std::string& a) { return has(a, "-bs") ? 106.0 : 100.0; };
    m->prompt = [](const std::string& a) { return has(a, "-bs") ? 890.0 : 1000.0; };
  }
  EXPECT_EQ(search(chat, {knob("backend-sampling", {"-bs"})}, 1e6, TuneGoal::kChat).best.label(), "-bs");
  TuneSearchResult p = search(prompt, {knob("backend-sampling", {"-bs"})}, 1e6, TuneGoal::kPrompt);
  EXPECT_TRUE(p.best.empty());
  EXPECT_EQ(p.knobs[0].candidates[0].decision, "clearly worse");
}

TEST(TuneSearch, AFailingCandidateIsDroppedAndTheSearchGoesOn) {
  FakeMachine m;
  m.decode = [](const std::string& a) { return has(a, "-ub 256") ? 120.0 : 100.0; };
  m.broken = [](const std::string& a) { return has(a, "--poll 0"); };
  TuneSearchResult r = search(m, {knob("poll", {"--poll 0"}), knob("ubatch", {"-ub 256"})});
  EXPECT_EQ(r.knobs[0].candidates[0].decision, "failed: config poll.poll-0: serve exited with code 1");
  EXPECT_EQ(r.best.label(), "-ub 256");
  EXPECT_TRUE(r.failure.empty());
  // A launch that cannot run at all ends the search, saying why.
  FakeMachine broken;
  broken.broken = [](const std::string&) { return true; };
  TuneSearchResult none = search(broken, {knob("ubatch", {"-ub 256"})});
  EXPECT_EQ(none.failure, "the base of ubatch failed: config ubatch.base: serve exited with code 1");
  EXPECT_TRUE(none.best.empty());
}

// A value that makes a measurement take far longer than the base's is cut off at three times the
// base's time (plus 10 s) and dropped, instead of eating the budget.
TEST(TuneSearch, AHopelesslySlowValueIsCutOff) {
  FakeMachine m;
  m.slow = [](const std::string& a) { return has(a, "-ngl 1"); };
  TuneSearchResult r = search(m, {knob("gpu-layers", {"-ngl 1"}), knob("ubatch", {"-ub 256"})});
  EXPECT_EQ(r.knobs[0].candidates[0].decision, "failed: config gpu-layers.ngl-1 took longer than its limit");
  EXPECT_EQ(r.knobs.size(), 2u);
  // Two rounds of ubatch, one of gpu-layers' base and its cut-off candidate (3 x 10 + 10 s).
  EXPECT_EQ(m.now, 10 + 40 + 4 * 10);
}

TEST(TuneSearch, LaunchWithLaysTheValueOverTheEngineArguments) {
  const EngineArgs& e = EngineArgs::builtin();
  BenchConfig launch{"current", {}, {"--device", "cpu", "--", "-t", "1", "-c", "512"}};
  BenchConfig c = launch_with(launch, parse_setting("ONEBIT_X=1 -t 2", "v", e), "x", e);
  EXPECT_EQ(c.args, (std::vector<std::string>{"--device", "cpu", "--", "-c", "512", "-t", "2"}));
  EXPECT_EQ(c.env, (std::vector<std::pair<std::string, std::string>>{{"ONEBIT_X", "1"}}));
  BenchConfig bare = launch_with({"current", {}, {}}, parse_setting("-ub 256", "v", e), "y", e);
  EXPECT_EQ(bare.args, (std::vector<std::string>{"--", "-ub", "256"}));
}

}  // namespace onebit
