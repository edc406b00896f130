#include "engine/launch_plan.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "base/error.h"

namespace onebit {
namespace {

struct Fixture {
  ServeOptions options;
  ModelFacts model;
  ModelFacts drafter;
  std::map<std::string, std::string> env;
  std::optional<RecipeSet> recipes;
  std::optional<RecipeMachine> machine;  // default: this one

  LaunchPlan plan(const std::string& device = "cpu", bool with_drafter = false) {
    LaunchInputs in;
    in.options = &options;
    in.model_path = "m.gguf";
    in.model = &model;
    in.drafter = with_drafter ? &drafter : nullptr;
    in.program = "/bin/llama-server";
    in.where = {device, ""};
    in.port = 4321;
    in.recipes = recipes ? &*recipes : nullptr;
    in.environment = env;
    if (machine) in.machine = *machine;
    return plan_launch(in, EngineArgs::builtin());
  }
};

using Args = std::vector<std::string>;

std::string error_of(Fixture& f) {
  try {
    f.plan();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(LaunchPlan, BaseCommandFollowsTheDevice) {
  Fixture f;
  f.model.architecture = "llama";
  EXPECT_EQ(f.plan("cpu").args,
            (Args{"-m", "m.gguf", "--host", "127.0.0.1", "--port", "4321", "-ngl", "0", "-dev", "none", "--jinja"}));
  EXPECT_EQ(f.plan("cuda").args, (Args{"-m", "m.gguf", "--host", "127.0.0.1", "--port", "4321", "-ngl", "99", "--jinja"}));
  EXPECT_EQ(f.plan().command_line(), "/bin/llama-server -m m.gguf --host 127.0.0.1 --port 4321 -ngl 0 -dev none --jinja");
  // The user's own device list wins.
  f.options.engine_args = {"--device", "CUDA0"};
  const Args a = f.plan("cpu").args;
  EXPECT_EQ(std::count(a.begin(), a.end(), "none"), 0) << f.plan("cpu").command_line();
}

TEST(LaunchPlan, ServeOptionsThenDrafterThenUserArgs) {
  Fixture f;
  f.options.ctx_size = 8192;
  f.options.flash_attn = "on";
  f.options.parallel = 2;
  f.options.draft = "small.gguf";
  f.options.draft_p_min = "0.6";
  f.options.engine_args = {"--temp", "0"};
  Args a = f.plan("cuda", true).args;
  EXPECT_EQ(Args(a.begin() + 9, a.end()),
            (Args{"-c", "8192", "-fa", "on", "-np", "2", "--spec-type", "draft-simple", "-md", "small.gguf", "-ngld",
                  "99", "--spec-draft-p-min", "0.6", "--temp", "0"}));
}

TEST(LaunchPlan, DflashDraftLengthComesFromTheBlockSize) {
  Fixture f;
  f.options.dflash = "df.gguf";
  f.drafter.drafter = "dflash";
  f.drafter.block_size = 8;
  Args a = f.plan("cpu", true).args;
  EXPECT_EQ(Args(a.begin() + 11, a.end()), (Args{"--spec-type", "draft-dflash", "-md", "df.gguf", "-ngld", "0", "-devd",
                                                 "none", "--spec-draft-n-max", "7"}));
  f.drafter.block_size.reset();
  a = f.plan("cpu", true).args;
  EXPECT_EQ(a.back(), "16");
  f.options.draft_max = 3;
  a = f.plan("cpu", true).args;
  EXPECT_EQ(a.back(), "3");
}

// A measured draft length for a pair (a recipe) wins over the block size, which is only the most a
// dflash file can draft.
TEST(LaunchPlan, DflashDraftLengthGivesWayToARecipe) {
  Fixture f;
  f.options.dflash = "df.gguf";
  f.drafter.drafter = "dflash";
  f.drafter.block_size = 16;
  f.recipes = parse_recipes(
      R"({"recipes": [{"id": "short", "match": {"drafter": ["dflash"]}, "args": ["--spec-draft-n-max", "3"],
                       "measured": "m"}]})",
      "t.json", EngineArgs::builtin());
  LaunchPlan p = f.plan("cpu", true);
  EXPECT_EQ(std::count(p.args.begin(), p.args.end(), "--spec-draft-n-max"), 1);
  EXPECT_EQ(p.args.back(), "3");
  EXPECT_EQ(p.recipe_lines(), (Args{"1bit serve: recipe short: --spec-draft-n-max 3"}));
  f.options.draft_max = 5;  // serve's own option wins over both
  p = f.plan("cpu", true);
  EXPECT_EQ(std::count(p.args.begin(), p.args.end(), "--spec-draft-n-max"), 1);
  EXPECT_TRUE(p.applied.empty());
}

// Each drafter kind has its engine type; one in a file of its own is placed like the model, the
// model's own next-token layer needs no file.
TEST(LaunchPlan, EachDrafterKindHasItsSpecType) {
  Fixture f;
  f.options.eagle3 = "e3.gguf";
  f.drafter.drafter = "eagle3";
  Args a = f.plan("cpu", true).args;
  EXPECT_EQ(Args(a.begin() + 11, a.end()), (Args{"--spec-type", "draft-eagle3", "-md", "e3.gguf", "-ngld", "0", "-devd", "none"}));
  Fixture head;
  head.options.mtp = true;
  head.options.mtp_head = "head.gguf";
  head.drafter.drafter = "mtp-head";
  a = head.plan("cuda", true).args;
  EXPECT_EQ(Args(a.begin() + 9, a.end()), (Args{"--spec-type", "draft-mtp", "-md", "head.gguf", "-ngld", "99"}));
  Fixture own;
  own.options.mtp = true;
  a = own.plan("cuda", true).args;
  EXPECT_EQ(Args(a.begin() + 9, a.end()), (Args{"--spec-type", "draft-mtp"}));
}

TEST(LaunchPlan, DrafterDefaultsGiveWayToTheUser) {
  Fixture f;
  f.options.dflash = "df.gguf";
  f.drafter.drafter = "dflash";
  f.drafter.block_size = 8;
  f.options.engine_args = {"--gpu-layers-draft", "0", "--spec-draft-n-max", "3"};
  Args a = f.plan("cuda", true).args;
  EXPECT_EQ(Args(a.begin() + 9, a.end()),
            (Args{"--spec-type", "draft-dflash", "-md", "df.gguf", "--gpu-layers-draft", "0", "--spec-draft-n-max", "3"}));
  // --draft-max is serve's own option: giving it twice is an error.
  f.options.draft_max = 5;
  EXPECT_EQ(error_of(f), "--spec-draft-n-max is set twice: by --draft-max and after \"--\"; keep one");
}

TEST(LaunchPlan, EngineVariablesForWhatServeOwnsAreRemoved) {
  Fixture f;
  f.env = {{"LLAMA_API_KEY", "x"}, {"LLAMA_ARG_PORT", "1"}, {"LLAMA_ARG_THREADS", "2"}};
  LaunchPlan p = f.plan();
  EXPECT_EQ(p.env_removed, (Args{"LLAMA_ARG_PORT", "LLAMA_API_KEY"}));
  EXPECT_EQ(p.command_line(), "env -u LLAMA_ARG_PORT -u LLAMA_API_KEY /bin/llama-server -m m.gguf --host 127.0.0.1 "
                              "--port 4321 -ngl 0 -dev none --jinja");
  f.options.engine_args = {"--api-prefix", "/x"};
  EXPECT_EQ(error_of(f), "--api-prefix after \"--\": serve sets it for the engine; use a reverse proxy in front of 1bit");
}

TEST(LaunchPlan, BatchInvariantIsTheEnginesSwitch) {
  Fixture f;
  EXPECT_TRUE(f.plan("cuda").env_added.empty());
  f.options.batch_invariant = true;
  f.options.draft = "small.gguf";
  const LaunchPlan p = f.plan("cuda", true);
  EXPECT_EQ(p.env_added, (std::vector<std::pair<std::string, std::string>>{{"ONEBIT_BATCH_INVARIANT", "1"}}));
  EXPECT_EQ(p.command_line().rfind("ONEBIT_BATCH_INVARIANT=1 /bin/llama-server -m m.gguf", 0), 0u) << p.command_line();
}

TEST(LaunchPlan, Mtp) {
  Fixture f;
  f.options.mtp = true;
  f.options.draft_max = 2;
  Args a = f.plan("cuda").args;
  EXPECT_EQ(Args(a.begin() + 9, a.end()), (Args{"--spec-type", "draft-mtp", "--spec-draft-n-max", "2"}));
}

TEST(LaunchPlan, UserArgsReplaceBaseDefaults) {
  Fixture f;
  f.options.engine_args = {"--n-gpu-layers", "10", "--no-jinja"};
  EXPECT_EQ(f.plan("cuda").args,
            (Args{"-m", "m.gguf", "--host", "127.0.0.1", "--port", "4321", "--n-gpu-layers", "10", "--no-jinja"}));
  Fixture g;
  g.env["LLAMA_ARG_N_GPU_LAYERS"] = "5";
  EXPECT_EQ(g.plan("cuda").args, (Args{"-m", "m.gguf", "--host", "127.0.0.1", "--port", "4321", "--jinja"}));
}

TEST(LaunchPlan, RejectsUserArgsThatCollide) {
  Fixture f;
  f.options.engine_args = {"--port", "1"};
  EXPECT_EQ(error_of(f), "--port after \"--\": serve sets it for the engine; use 1bit serve --port");
  f.options.engine_args = {"-m", "other.gguf"};
  EXPECT_EQ(error_of(f), "--model after \"--\": serve sets it for the engine; use 1bit serve -m");
  f.options.engine_args = {"--api-key", "k"};
  EXPECT_EQ(error_of(f), "--api-key after \"--\": serve sets it for the engine; use 1bit serve --api-key");
  f.options.engine_args = {"--ctx-size", "10"};
  f.options.ctx_size = 20;
  EXPECT_EQ(error_of(f), "-c is set twice: by -c and after \"--\"; keep one");
  f.options.ctx_size.reset();
  f.options.engine_args = {"--spec-type", "ngram-simple"};
  f.options.mtp = true;
  EXPECT_EQ(error_of(f), "--spec-type is set twice: by --mtp and after \"--\"; keep one");
}

TEST(LaunchPlan, RecipesComeLastAndAreListed) {
  Fixture f;
  f.model.architecture = "llama";
  f.recipes = parse_recipes(
      R"({"recipes": [{"id": "r1", "match": {"device": ["cpu"]}, "args": ["-b", "256", "-ub", "256"],
                       "env": {"OMP_X": "a b"}, "measured": "m"}]})",
      "t.json", EngineArgs::builtin());
  f.options.engine_args = {"--batch-size", "64"};
  LaunchPlan p = f.plan();
  EXPECT_EQ(Args(p.args.end() - 4, p.args.end()), (Args{"--batch-size", "64", "-ub", "256"}));
  EXPECT_EQ(p.recipe_lines(), (Args{"1bit serve: recipe r1: -ub 256 'OMP_X=a b'"}));
  EXPECT_EQ(p.command_line().substr(0, 29), "OMP_X='a b' /bin/llama-server");  // an assignment to sh
  EXPECT_TRUE(f.plan("cuda").applied.empty());
}

// The machine a launch names is what a recipe's cpu and engine keys are matched against; by
// default it is this one.
TEST(LaunchPlan, RecipesMatchTheMachineOfTheLaunch) {
  Fixture f;
  f.model.architecture = "llama";
  f.recipes = parse_recipes(
      R"({"recipes": [{"id": "bound", "match": {"cpu": ["Test CPU"], "engine": ["0123456789abcdef"]},
                       "args": ["-ub", "64"], "measured": "m"}]})",
      "t.json", EngineArgs::builtin());
  EXPECT_TRUE(f.plan().applied.empty());  // this machine is not "Test CPU" with that build
  f.machine = RecipeMachine{"Test CPU", "0123456789abcdef"};
  EXPECT_EQ(f.plan().recipe_lines(), (Args{"1bit serve: recipe bound: -ub 64"}));
  f.machine->engine = "fedcba9876543210";
  EXPECT_TRUE(f.plan().applied.empty());
  EXPECT_EQ(LaunchInputs().machine.cpu, RecipeMachine::here().cpu);
  EXPECT_EQ(LaunchInputs().machine.engine, RecipeMachine::here().engine);
}

TEST(LaunchPlan, RpcWorkersTakeEveryLayer) {
  Fixture f;
  f.options.rpc = parse_rpc_endpoints("127.0.0.1:50052,[::1]:50053");
  // On cpu the local devices are left out and the workers' alone stay, named after --rpc.
  EXPECT_EQ(f.plan("cpu").args, (Args{"-m", "m.gguf", "--host", "127.0.0.1", "--port", "4321", "--rpc",
                                      "127.0.0.1:50052,[::1]:50053", "-ngl", "99", "-dev", "RPC0,RPC1", "--jinja"}));
  // Beside a GPU the engine places layers on it and the workers alike.
  EXPECT_EQ(f.plan("cuda").args, (Args{"-m", "m.gguf", "--host", "127.0.0.1", "--port", "4321", "--rpc",
                                       "127.0.0.1:50052,[::1]:50053", "-ngl", "99", "--jinja"}));
  // The workers are serve's: checked before the engine starts, and their devices named.
  f.options.rpc.clear();
  f.options.engine_args = {"--rpc", "h:1"};
  EXPECT_EQ(error_of(f), "--rpc after \"--\": serve sets it for the engine; use 1bit serve --rpc (or lemonade's rpc "
                         "option), which checks each worker first");
  f.env = {{"LLAMA_ARG_RPC", "h:1"}};
  f.options.engine_args.clear();
  EXPECT_EQ(f.plan().env_removed, std::vector<std::string>{"LLAMA_ARG_RPC"});
}

TEST(LaunchPlan, RpcDevicesAsTheEngineListed) {
  Fixture f;
  f.options.rpc = parse_rpc_endpoints("a:1");
  LaunchInputs in;
  in.options = &f.options;
  in.model_path = "m.gguf";
  in.model = &f.model;
  in.program = "/bin/llama-server";
  in.where = {"cpu", ""};
  in.rpc_devices = {"RPC0", "RPC1"};  // one worker offering two GPUs
  const Args args = plan_launch(in, EngineArgs::builtin()).args;
  const auto dev = std::find(args.begin(), args.end(), "-dev");
  ASSERT_NE(dev, args.end());
  EXPECT_EQ(*(dev + 1), "RPC0,RPC1");
}

TEST(LaunchPlan, SeveralGpusAreSplitByLayer) {
  Fixture f;
  LaunchInputs in;
  in.options = &f.options;
  in.model_path = "m.gguf";
  in.model = &f.model;
  in.program = "/bin/llama-server";
  in.where = {"cuda", "NVIDIA H200", {"CUDA0: NVIDIA H200 (143771 MiB)", "CUDA1: NVIDIA H200 (143771 MiB)"}};
  Args args = plan_launch(in, EngineArgs::builtin()).args;
  EXPECT_NE(std::find(args.begin(), args.end(), "-sm"), args.end());
  EXPECT_EQ(*(std::find(args.begin(), args.end(), "-sm") + 1), "layer");
  f.options.engine_args = {"--split-mode", "row"};  // the user's layout wins
  args = plan_launch(in, EngineArgs::builtin()).args;
  EXPECT_EQ(std::count(args.begin(), args.end(), "-sm"), 0);
  EXPECT_EQ(*(std::find(args.begin(), args.end(), "--split-mode") + 1), "row");
  in.where.devices.pop_back();  // one GPU: nothing to split
  f.options.engine_args.clear();
  args = plan_launch(in, EngineArgs::builtin()).args;
  EXPECT_EQ(std::count(args.begin(), args.end(), "-sm"), 0);
}

}  // namespace onebit
