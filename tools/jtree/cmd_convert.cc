// jtree convert SRC DST [options]: runs the Python implementation (python/jtree/convert/), which
// reads the foreign formats through their own Python libraries (torch, gguf, orbax...). The
// interpreter is $JTREE_PYTHON if set, then python3 on PATH: the first in which jtree.convert
// imports runs the command with the same arguments (its output, exit status and progress bar
// are the command's). It is a child process rather than an exec, so that an interpreter
// without jtree can be passed over for the next one without starting Python twice.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "commands.h"

extern char** environ;

namespace jtree::cli {
namespace {

// The exit status by which the bootstrap says "jtree.convert does not import here".
constexpr int kNoJtree = 117;
constexpr const char* kBoot =
    "import sys\n"
    "try:\n"
    "    from jtree.convert._cli import main\n"
    "except ImportError:\n"
    "    sys.exit(117)\n"
    "main(sys.argv[1:])\n";

// Runs `python -c kBoot args...` and returns its exit status (128 + N if killed by signal N),
// or -1 when the interpreter could not be started.
int run_python(const std::string& python, const Args& args) {
  std::vector<char*> argv = {const_cast<char*>(python.c_str()), const_cast<char*>("-c"),
                             const_cast<char*>(kBoot)};
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  // As system() does: while the child runs, Ctrl-C and Ctrl-\ are its business (the terminal
  // sends them to both); the child gets the default dispositions back.
  struct sigaction ignore {}, old_int {}, old_quit {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGINT, &ignore, &old_int);
  sigaction(SIGQUIT, &ignore, &old_quit);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGQUIT);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);

  std::fflush(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, python.c_str(), nullptr, &attr, argv.data(), environ);
  posix_spawnattr_destroy(&attr);
  int result = -1;
  if (rc == 0) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status)) result = WEXITSTATUS(status);
    else if (WIFSIGNALED(status)) result = 128 + WTERMSIG(status);
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGQUIT, &old_quit, nullptr);
  return result;
}

}  // namespace

int cmd_convert(const Args& args) {
  std::vector<std::string> candidates;
  const char* env = std::getenv("JTREE_PYTHON");
  if (env != nullptr && *env != '\0') candidates.emplace_back(env);
  candidates.emplace_back("python3");

  std::string tried;
  for (const std::string& python : candidates) {
    int rc = run_python(python, args);
    if (rc >= 0 && rc != kNoJtree) return rc;
    if (!tried.empty()) tried += "; ";
    tried += python + (rc < 0 ? ": cannot be run" : ": jtree.convert does not import");
  }
  const std::string why =
      "needs Python with the jtree package: pip install jtree-arrays (or set JTREE_PYTHON to an "
      "interpreter that has it). Tried: " + tried;
  for (const std::string& a : args) {
    if (a == "-h" || a == "--help") {
      // Help asked for: what the command is, and why its full help (the Python
      // implementation's, which owns the options) cannot be shown here. Not an error.
      std::printf("usage: jtree convert SRC DST [options]\n\n"
                  "Converts checkpoints into .jtree files (safetensors, PyTorch, NumPy, GGUF,\n"
                  "orbax, flax, JAX) and .jtree files into safetensors or GGUF, through the\n"
                  "Python implementation (python -m jtree.convert). Its options and formats are\n"
                  "listed by its own --help, which this machine cannot run: it %s\n",
                  why.c_str());
      return 0;
    }
  }
  std::fprintf(stderr, "jtree convert: %s\n", why.c_str());
  return 1;
}

}  // namespace jtree::cli
