// The same model, initial weights and batch order trained 100 steps in C++ and with the
// installed torch's Python give the same losses within 1e-5 (fp32, CPU).
#include <fstream>

#include <nlohmann/json.hpp>
#include <torch/script.h>
#include <torch/torch.h>

#include "saturate/models/zoo.h"
#include "saturate/train/trainer.h"
#include "support/support.h"

using namespace saturate;

TEST(PythonParityTest, HundredSgdStepsMatchPyTorchWithinOneInOneHundredThousand) {
  const std::string dir = saturate::testing::temp_dir("parity");
  const std::string script = dir + "/parity.py";
  std::ofstream(script) << R"(import json, sys, torch
d = sys.argv[1]
torch.manual_seed(0)
torch.set_num_threads(1)
m = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
torch.jit.script(m).save(d + "/model.pt")
g = torch.Generator().manual_seed(1)
x = torch.randn(1600, 1, 28, 28, generator=g)
y = torch.randint(0, 10, (1600,), generator=g)
class Data(torch.nn.Module):
    def __init__(self, x, y):
        super().__init__()
        self.register_buffer("x", x)
        self.register_buffer("y", y)
torch.jit.script(Data(x, y)).save(d + "/data.pt")
opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
losses = []
for step in range(100):
    i = (step % 25) * 64
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(m(x[i:i + 64]), y[i:i + 64])
    loss.backward()
    opt.step()
    losses.append(loss.item())
json.dump(losses, open(d + "/losses.json", "w"))
)";
  std::string out;
  ASSERT_EQ(saturate::testing::run_command(std::string(SATURATE_PYTHON) + " " + script + " " + dir, &out), 0) << out;
  torch::jit::Module data = torch::jit::load(dir + "/data.pt");
  ModelSpec s;
  s.name = dir + "/model.pt";
  auto meter = make_memory_meter(torch::kCPU);
  Workload w(build_model(s), torch::kCPU, OptimizerKind::kSgd, 0.05);
  TensorTrainData train(data.attr("x").toTensor(), data.attr("y").toTensor(), 64);
  TrainOptions o;
  o.micro_batch = 64;
  o.max_steps = 100;
  o.schedule.peak_lr = 0.05;
  Trainer trainer(w, *meter, train, nullptr, o);
  const TrainResult r = trainer.run();
  std::ifstream in(dir + "/losses.json");
  const auto python = nlohmann::json::parse(in).get<std::vector<double>>();
  ASSERT_EQ(python.size(), r.losses.size());
  for (size_t i = 0; i < python.size(); ++i) EXPECT_NEAR(r.losses[i], python[i], 1e-5) << "step " << i;
  EXPECT_LT(r.losses.back(), r.losses.front());
}
