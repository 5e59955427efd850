// `accel coordinator` and `accel worker`: distributed jobs on the cluster engine.
#include <csignal>
#include <algorithm>
#include <boost/program_options.hpp>
#include "accel/registry.hpp"
#include <cstdlib>
#include <iostream>

#include "accel/error.hpp"
#include "commands.hpp"
#include "engine.hpp"
#include "kmeans/kmeans_job.hpp"
#include "svm/svm_job.hpp"
#include "svm_train_args.hpp"

namespace po = boost::program_options;

namespace accel::cli {
namespace {

void common_options(po::options_description& d, cluster::Common& c, bool device = true, int timeout_ms = 2000) {
  d.add_options()("job", po::value(&c.job)->default_value(0),
                  "job token, a non-zero 64-bit number (0: the coordinator draws one and writes it to --job-file; "
                  "a worker reads --job-file, ACCEL_JOB_TOKEN, or the coordinator's file)")
      ("job-file", po::value(&c.job_file),
       "where the drawn token is written (coordinator) or read (worker); default ~/.accel/job-PORT.token");
  if (device)
    d.add_options()("device", po::value(&c.device)->default_value("all"),
                    device_option_help("this node's devices").c_str());
  d.add_options()("timeout-ms", po::value(&c.timeout_ms)->default_value(timeout_ms), "barrier wait before a silent member is evicted")
      ("tls", po::value(&c.tls), "UCX transports (UCX_TLS), e.g. tcp")
      ("keepalive-ms", po::value(&c.keepalive_ms)->default_value(5000), "UCX keepalive interval")
      ("log-json", po::value(&c.log_json), "append one JSON line per iteration and per transfer to this file");
}

void engine_options(po::options_description& d, cluster::CoordinatorOptions& o) {
  d.add_options()("workers", po::value(&o.workers), "number of workers to wait for before round 1 (default: launcher size - 1)")
      ("max-workers", po::value(&o.max_workers)->default_value(0),
       "workers started without --id may join the running job up to this many in all (0: --workers); with --pull "
       "they get a share of the rows by measured rate")
      ("listen", po::value(&o.listen)->default_value("127.0.0.1:13337"), "ADDR:PORT to listen on")
      ("rendezvous", po::value(&o.rendezvous_file),
       "once listening, write ADDR:PORT and the job token to this file (0600), for the other ranks of a launcher")
      ("pull", po::bool_switch(&o.pull),
       "workers read their rows from the input file (shared storage) instead of receiving them")
      ("block-size", po::value(&o.block_size)->default_value(64u << 20), "bulk transfer block size in bytes")
      ("protocol", po::value(&o.protocol)->default_value("auto"), "bulk protocol: auto | put | am")
      ("gather-from", po::value(&o.gather_from)->default_value(cluster::kGatherFrom),
       "k-means: from this many participants (coordinator and --max-workers) on, each round's contributions go "
       "to the coordinator alone, which sends every member the next centroids (0: never; 1: always)")
      ("tree-from", po::value(&o.tree_from)->default_value(cluster::kTreeFrom),
       "k-means, gathered rounds: from this many participants on, the contributions go up a binary tree of "
       "members, each adding its children's partial sums to its own (0: never; 1: always)")
      ("join-timeout-ms", po::value(&o.join_timeout_ms)->default_value(60000), "how long to wait for workers to join")
      ("checkpoint-dir", po::value(&o.checkpoint_dir),
       "write the coordinator's checkpoint here (k-means, svm-train), at Young's interval sqrt(2 x cost x --mtbf)")
      ("resume", po::value(&o.resume_dir),
       "DIR: continue the job of the checkpoint in DIR (same input and options; its token and address), and go on "
       "checkpointing there")
      ("mtbf", po::value(&o.mtbf_s)->default_value(3600), "expected seconds between coordinator failures, for the "
       "checkpoint interval");
}

void launcher_workers(cluster::CoordinatorOptions& o, const po::variables_map& vm) {
  if (!vm.count("workers")) o.workers = cluster::launcher_size(0) - 1;
}

// `accel coordinator svm-train [svm-train options] --workers N --listen
// ADDR training_file [model_file]`: svm-train's command line across the
// workers. --device is the coordinator's; workers take their own.
int coordinator_svm_train(const std::vector<std::string>& args) {
  cluster::CoordinatorOptions o;
  o.workers = 0;  // not given: the launcher's size - 1
  po::options_description cluster_opts("cluster");
  engine_options(cluster_opts, o);
  common_options(cluster_opts, o, false, 10000);
  SvmTrainArgs a;
  if (auto rc = parse_svm_train(args,
                                "accel coordinator svm-train [svm-train options] --workers N --listen ADDR "
                                "training_file [model_file]\n  svm-train across workers (accel worker)",
                                cluster_opts, a))
    return *rc;
  if (a.folds != 0) throw InputError("-v " + std::to_string(a.folds) + ": cross validation runs on one node (accel svm-train -v)");
  if (a.params.solver != Solver::Batch) throw InputError("--solver " + a.solver + ": across nodes the solver is batch");
  if (o.workers == 0) o.workers = cluster::launcher_size(0) - 1;
  o.device = a.device;
  o.json = a.json;
  o.input = a.train_file;
  cluster::SvmJob job({a.train_file, a.model_file, a.params, a.device, o.pull});
  const int rc = cluster::run_coordinator(o, job);
  if (!a.json && !a.quiet) print_svm_train(a, job.training_set(), job.model(), job.report(), job.device_names());
  return rc;
}

}  // namespace

int coordinator_main(const std::vector<std::string>& args) {
  // `svm-train` names the workload wherever it stands (scripts/cluster.sh
  // puts its own options first); without it the job is k-means.
  if (auto it = std::find(args.begin(), args.end(), "svm-train"); it != args.end()) {
    std::vector<std::string> rest(args.begin(), it);
    rest.insert(rest.end(), it + 1, args.end());
    return coordinator_svm_train(rest);
  }
  cluster::CoordinatorOptions o;
  cluster::KMeansJobOptions ko;
  std::string on_loss;
  po::options_description d("accel coordinator --input FILE --k K --workers N [options]");
  d.add_options()("help,h", "this help")
      ("input", po::value(&ko.input)->required(), "input rows (.npy, CSV, LIBSVM, IDX)")
      ("k", po::value(&ko.k)->required(), "clusters")
      ("max-iter", po::value(&ko.max_iter)->default_value(100), "iteration limit")
      ("tol", po::value(&ko.tol)->default_value(1e-4), "stop when no centroid moves this far; 0 runs max-iter")
      ("init", po::value(&ko.init)->default_value("kmeans++"), "kmeans++ | random | kmeans-parallel | FILE.npy")
      ("seed", po::value(&ko.seed)->default_value(0), "random seed")
      ("algorithm", po::value(&ko.algorithm)->default_value("auto"), "lloyd | yinyang | auto (yinyang for d >= 16), on every participant")
      ("on-loss", po::value(&on_loss)->default_value("move"),
       "a lost worker's rows: move (the coordinator computes them from the iteration it was lost in, until the surviving "
       "workers take them over: with --pull they read them, otherwise the coordinator pushes them) | drop (left out until it returns, as in the Distributed k-Means Clustering study)")
      ("output-centroids", po::value(&ko.output_centroids), "write the centroids (.npy)")
      ("output-labels", po::value(&ko.output_labels),
       "write every row's label (n int32 .npy); each member writes its own rows into FILE.partial, so the path must "
       "be on storage every member shares")
      ("json", "print the summary as JSON");
  engine_options(d, o);
  common_options(d, o);
  po::variables_map vm;
  if (!parse_or_help(args, d, vm)) return 0;
  launcher_workers(o, vm);
  o.json = vm.count("json") > 0;
  if (on_loss != "move" && on_loss != "drop") throw InputError("--on-loss " + on_loss + ": must be move or drop");
  o.move_lost_rows = on_loss == "move";
  o.input = ko.input;
  ko.resumed = !o.resume_dir.empty();
  ko.rows_may_drop = !o.move_lost_rows;
  ko.pull = o.pull;
  cluster::KMeansJob job(ko);
  return cluster::run_coordinator(o, job);
}

int worker_main(const std::vector<std::string>& args) {
  cluster::WorkerOptions o;
  po::options_description d("accel worker --coordinator ADDR:PORT [--id I] [options]");
  d.add_options()("help,h", "this help")
      ("coordinator", po::value(&o.coordinator)->required(), "the coordinator's ADDR:PORT")
      ("id", po::value(&o.id), "worker id 1..N (default: the launcher's rank; outside a launcher, one the "
                                "coordinator gives, to join a running job)")
      ("snapshot-dir", po::value(&o.snapshot_dir), "keep the task here and resume from it after a restart")
      ("snapshot-rows", "keep the partition's rows in the snapshot too (default: a resume asks the coordinator "
                        "for them again)")
      ("coordinator-timeout", po::value(&o.coordinator_timeout_ms)->default_value(0),
       "ms to keep trying to reach a lost coordinator (one restarted with --resume); 0: try once, then exit 3");
  common_options(d, o);
  po::variables_map vm;
  if (!parse_or_help(args, d, vm)) return 0;
  if (!vm.count("id")) {
    // Outside a launcher (which gives the rank), the coordinator gives an
    // id: a worker joining a running job (--max-workers).
    const int rank = cluster::launcher_rank(-1);
    o.id = rank < 0 ? 0 : static_cast<std::uint32_t>(rank);
  } else if (o.id < 1) {
    throw InputError("--id must be 1 or more (0 is the coordinator)");
  }
  o.snapshot_rows = vm.count("snapshot-rows") > 0;
  // SIGTERM is a graceful leave at a round boundary (a second one kills).
  static volatile std::sig_atomic_t term = 0;
  struct sigaction sa {};
  sa.sa_handler = [](int) { term = 1; };
  sa.sa_flags = SA_RESTART | SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  cluster::WorkerRun run(o);
  while (run.step())
    if (term) run.leave();
  return run.exit_code();
}

}  // namespace accel::cli
