// `hwarb gdbserver`: gdb, lldb or an IDE debug a real process through the GDB remote protocol,
// with hwarb's watchpoints (native::GdbServer over a WatchSession).
//
//   hwarb gdbserver [--software] [--once] [--attach] COMM [PROG [ARGS] | PID]   (gdbserver's form)
//   hwarb gdbserver [--software] [--once] --multi COMM [PROG [ARGS] | --attach PID]
//   hwarb gdbserver [--software] [--once] (COMM | --stdio) (-- CMD ARGS | -p PID)
//
// COMM: HOST:PORT listens for one client on TCP (":1234" is 127.0.0.1, "localhost:1234" its
// IPv4 address first; HOST a name or an IPv4 or IPv6 address, "[::1]:1234" or with tcp6:
// "::1:1234"; port 0 picks one, said on stderr; gdbserver's "tcp:", "tcp4:" and "tcp6:"
// prefixes choose the family; a name that does not resolve says "cannot resolve name");
// "stdio", "-" or --stdio talk on standard input and output, as `target remote | hwarb
// gdbserver stdio prog` wants: the program's standard output then goes to standard error, so
// that it never mixes with the protocol. As with gdbserver, whoever can connect to the port
// controls the program: listen on 127.0.0.1 unless the network is trusted.
// In gdbserver's form everything after COMM is the program and its arguments (options of the
// program's own included), or with --attach the PID. The program: a name without a slash is a
// file of the working directory when there is one (run by its absolute path, which is its
// argv[0]), else it is searched in PATH, as gdbserver 13.1 does (its program_path); watch, stat
// and trace search PATH alone, as perf and execvp(3) do. --disable-randomization (the default)
// and --no-disable-randomization (= --aslr) are gdbserver's.
// Extended mode (gdb's `target extended-remote`): the client may `run` (vRun), `attach` (vAttach),
// `kill` and `run` again, and `detach` without ending the server. --multi may be given without a
// program: the client then runs one (`set remote exec-file`, `run`). As gdbserver's, the server
// ends at a disconnect unless it is in extended mode (--multi, or the client asked for it) and
// --once was not given: then it waits for the next client; `monitor exit` ends it. With --stdio
// there is one client. --wrapper WRAPPER... -- runs each program through the wrapper (as
// gdbserver: `env FOO=1 --`), stopped at the program's exec. UDP connections are refused as
// usage errors naming what is not served.
// Watchpoints take debug registers where the probe sees hits delivered, else (and with
// --software) the software path. Exit status: 0 when the client detached, killed the program or
// went away; 1 when the target could not be traced or the server failed; 2 for usage errors.
#include <signal.h>
#include <unistd.h>

#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "commands.h"
#include "hwarb/linux/files.h"
#include "hwarb/linux/gdb_server.h"
#include "hwarb/linux/probe.h"
#include "hwarb/linux/session.h"
#include "hwarb/linux/signals.h"
#include "hwarb/linux/socket.h"
#include "hwarb/linux/spawn.h"
#include "hwarb/linux/terminal.h"
#include "hwarb/linux/watch_session.h"
#include "number_scan.h"
#include "session.h"

namespace hwarb::cli {
namespace {

struct ServerArgs {
  std::string where;  // COMM: [tcp:|tcp4:|tcp6:]HOST:PORT, "stdio" or "-"
  native::IpFamily family = native::IpFamily::kAny;  // from the tcp4:/tcp6: prefix
  bool stdio = false;
  bool software = false;
  bool once = false;
  bool attach = false;  // gdbserver's --attach: what follows COMM is a PID
  bool multi = false;
  bool selftest = false;                   // gdbserver's --selftest
  bool keep_aslr = false;                  // gdbserver's --no-disable-randomization
  bool no_aslr = false;                    // gdbserver's --disable-randomization (the default)
  bool with_shell = false;                 // gdbserver's --startup-with-shell (the default)
  bool without_shell = false;              // gdbserver's --no-startup-with-shell
  std::string wrapper;                     // --wrapper WORD (without gdbserver's closing "--")
  std::vector<std::string> wrapper_words;  // gdbserver's --wrapper WRAPPER... -- (main.cpp)
  std::string disable_packets;             // gdbserver's --disable-packet=OPT1[,OPT2...]
  std::set<std::string> disabled;
  bool debug = false;             // gdbserver's --debug: the server's events on standard error
  bool remote_debug = false;      // gdbserver's --remote-debug: the packets too
  bool event_loop_debug = false;  // gdbserver's --event-loop-debug: accepted; hwarb logs no more
  std::string debug_file;         // gdbserver's --debug-file=FILE: the log lines go there
  std::string debug_format;       // gdbserver's --debug-format=all|none|timestamp
  TargetOptions target;
  std::vector<std::string> rest;  // what follows COMM (gdbserver's form)
};

int fail(const std::string& message, int code) {
  std::cerr << "hwarb gdbserver: " << message << "\n";
  return code;
}

// HOST:PORT → (host, port); EINVAL naming the field.
Result<std::pair<std::string, std::uint16_t>> parse_where(const std::string& where) {
  const std::size_t colon = where.rfind(':');
  if (colon == std::string::npos) {
    return make_error(ErrorCode::kInval,
                      "connection: '" + where + "' is not HOST:PORT, --stdio or -");
  }
  const std::string port_text = where.substr(colon + 1);
  const NumberScan n = scan_number(port_text, 0);
  if (port_text.empty() || n.kind != NumberScan::Kind::kOk || n.end != port_text.size() ||
      n.value > 65535) {
    return make_error(ErrorCode::kInval,
                      "connection: port '" + port_text + "' is not a number from 0 to 65535");
  }
  return std::pair{where.substr(0, colon), static_cast<std::uint16_t>(n.value)};
}

// gdbserver's OPT1[,OPT2...] option values, word by word.
std::vector<std::string> comma_list(std::string_view list) {
  std::vector<std::string> words;
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    words.emplace_back(list.substr(0, comma));
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
  }
  return words;
}

// gdbserver's form onto the target options: PROG ARGS after COMM, or --attach PID. A usage
// error naming the field when both forms, or neither, give the target.
Result<void> take_gdbserver_form(ServerArgs& args) {
  // gdbserver's --disable-packet: its names, "threads" for the four thread packets.
  for (const std::string& name : comma_list(args.disable_packets)) {
    if (name == "threads") {
      args.disabled.insert({"vCont", "Tthread", "qC", "qfThreadInfo"});
    } else if (name == "vCont" || name == "T" || name == "Tthread" || name == "qC" ||
               name == "qfThreadInfo") {
      args.disabled.insert(name);
    } else {
      return make_error(ErrorCode::kInval,
                        "--disable-packet: '" + name +
                            "' is not one of vCont, T, Tthread, qC, qfThreadInfo, threads");
    }
  }
  if (args.keep_aslr && args.no_aslr) {
    return make_error(ErrorCode::kInval,
                      "--disable-randomization: contradicts --no-disable-randomization");
  }
  if (args.keep_aslr) args.target.aslr = true;
  if (args.with_shell && args.without_shell) {
    return make_error(ErrorCode::kInval,
                      "--startup-with-shell: contradicts --no-startup-with-shell");
  }
  for (const auto& [prefix, family] :
       {std::pair{"tcp:", native::IpFamily::kAny}, std::pair{"tcp4:", native::IpFamily::kV4},
        std::pair{"tcp6:", native::IpFamily::kV6}}) {
    if (args.where.rfind(prefix, 0) == 0) {
      args.where.erase(0, std::string_view(prefix).size());
      args.family = family;
      break;
    }
  }
  for (const char* prefix : {"udp:", "udp4:", "udp6:"}) {
    if (args.where.rfind(prefix, 0) == 0) {
      return make_error(ErrorCode::kOpNotSupp,
                        "connection: '" + args.where + "': only TCP is served");
    }
  }
  if (args.where == "stdio") args.where = "-";
  if (args.attach) {
    if (args.target.pid != 0 || args.target.tid != 0) {
      return make_error(ErrorCode::kInval, "--attach: give the PID after COMM, and nothing else");
    }
    if (args.rest.size() != 1) {
      return make_error(ErrorCode::kInval, "--attach: give exactly one PID after COMM");
    }
    const NumberScan n = scan_number(args.rest[0], 0);
    if (n.kind != NumberScan::Kind::kOk || n.hex || n.end != args.rest[0].size() || n.value == 0 ||
        n.value > 0x7fffffff) {
      return make_error(ErrorCode::kInval,
                        "--attach: PID '" + args.rest[0] + "' is not a process id");
    }
    args.target.pid = static_cast<pid_t>(n.value);
    return {};
  }
  if (args.rest.empty()) return {};
  if (args.target.pid != 0 || args.target.tid != 0) {
    return make_error(ErrorCode::kInval,
                      "target: '" + args.rest[0] + "' after COMM and -p or -t were both given");
  }
  // check_target takes the command from where main() keeps what followed a "--".
  set_trailing_command(std::move(args.rest), true);
  args.rest.clear();
  return {};
}

int run_server(ServerArgs& args) {
  if (args.selftest) {
    // gdbserver's words for a build without its built-in unit tests, which gdb's testsuite
    // takes as "unsupported": hwarb's tests are its test suite (scripts/test), not in the binary.
    std::cout << "Selftests have been disabled for this build.\n";
    return kExitOk;
  }
  args.wrapper_words = take_gdbserver_wrapper();
  if (args.wrapper_words.empty() && !args.wrapper.empty()) args.wrapper_words = {args.wrapper};
  if (auto r = take_gdbserver_form(args); !r) return fail(r.error().to_string(), kExitUsage);
  if (args.where == "-") {
    args.stdio = true;
    args.where.clear();
  }
  if (args.stdio == !args.where.empty()) {
    return fail("connection: give exactly one of HOST:PORT, --stdio or -", kExitUsage);
  }
  std::optional<std::pair<std::string, std::uint16_t>> listen;
  if (!args.stdio) {
    auto parsed = parse_where(args.where);
    if (!parsed) return fail(parsed.error().to_string(), kExitUsage);
    listen = *parsed;
  }
  // --multi without a target: the client runs or attaches one (vRun, vAttach).
  bool no_target = false;
  if (auto t = check_target(args.target); !t) {
    no_target =
        args.multi && args.target.pid == 0 && args.target.tid == 0 && args.target.command.empty();
    if (!no_target) return fail(t.error().to_string(), kExitUsage);
  }
  if (!args.target.command.empty() && args.target.tid != 0) {
    return fail("target: -t is not served (give -p PID or a command)", kExitUsage);
  }
  // A client that goes away mid-write must not kill the server before it cleans up; SIGINT,
  // SIGTERM and SIGHUP end it as a client that goes away does (the process is left as `watch`
  // leaves it: an attached one detached unmodified, a spawned one killed).
  if (auto r = native::ignore_signal(SIGPIPE); !r) return fail(r.error().to_string(), kExitFailure);
  native::install_interrupt_flag();

  native::WatchSessionOptions options = watch_options(args.software);
  options.stop_at_hits = true;
  bool debug_timestamps = false;
  if (!args.debug_format.empty()) {
    // A comma-separated list, as gdbserver takes it.
    for (const std::string& word : comma_list(args.debug_format)) {
      if (word == "all" || word == "timestamp") {
        debug_timestamps = true;
      } else if (word == "none") {
        debug_timestamps = false;
      } else {
        return fail("--debug-format: EINVAL: '" + word + "' is not all, none or timestamp",
                    kExitUsage);
      }
    }
  }
  native::Fd debug_log;
  if (!args.debug_file.empty()) {
    auto f = native::create_file(args.debug_file);
    if (!f) return fail("--debug-file: " + f.error().to_string(), kExitUsage);
    debug_log = std::move(*f);
  }

  // Listen before the program starts: a port in use is the user's error, with nothing run.
  native::Fd listener;
  if (listen) {
    auto l = native::listen_tcp(listen->first, listen->second, args.family);
    if (!l) return fail(l.error().to_string(), kExitUsage);
    listener = std::move(*l);
  }
  std::optional<native::Inferior> inferior;
  // As gdbserver: the program dies with the server (kill_on_exit) unless the client detached.
  const native::InferiorOptions spawn_options{.kill_on_exit = true,
                                              .stdout_fd = args.stdio ? STDERR_FILENO : -1,
                                              .disable_aslr = !args.target.aslr,
                                              .own_process_group = true};
  if (no_target) {
    // The client's vRun or vAttach makes the process.
  } else if (!args.target.command.empty()) {
    // As gdbserver: `prog` alone is ./prog when there is such a file here (run by its absolute
    // path), before PATH; watch, stat and trace search PATH only, as perf and execvp do.
    if (auto here = native::in_working_directory(args.target.command[0])) {
      args.target.command[0] = *here;
    }
    // With --stdio, standard output is the protocol: the program writes to standard error. It
    // dies with the server (kill_on_exit) unless the client detached from it.
    auto spawned =
        native::spawn_program(args.wrapper_words, args.target.command, spawn_options,
                              args.without_shell ? std::string() : native::startup_shell());
    if (!spawned) return fail(spawned.error().to_string(), kExitFailure);
    inferior.emplace(std::move(*spawned));
  } else {
    auto attached = native::open_target(args.target);
    if (!attached) return fail(attached.error().to_string(), kExitFailure);
    inferior.emplace(std::move(*attached));
  }
  const std::string placement = native::placement_policy(options);
  // The program of the command line, when hwarb started it: joined after a detach.
  const pid_t started = inferior && inferior->spawned() ? inferior->pid() : 0;
  if (inferior) {
    std::cerr << "hwarb gdbserver: " << target_name(args.target) << " is process "
              << inferior->pid() << "; watchpoints: " << placement << "\n";
  } else {
    std::cerr << "hwarb gdbserver: no program yet (the client runs or attaches one); "
                 "watchpoints: "
              << placement << "\n";
  }
  std::optional<native::WatchSession> session;
  std::optional<native::GdbServer> server;
  if (inferior) {
    session.emplace(*inferior, options);
    server.emplace(*inferior, *session, STDIN_FILENO, STDOUT_FILENO);
  } else {
    server.emplace(STDIN_FILENO, STDOUT_FILENO);
  }
  server->launch_with({.program = args.target.command,
                       .wrapper = args.wrapper_words,
                       .inferior = spawn_options,
                       .startup_with_shell = !args.without_shell,
                       .watches = options,
                       .multi = args.multi,
                       .once = args.once || args.stdio,
                       .disabled_packets = args.disabled,
                       .debug = args.debug,
                       .remote_debug = args.remote_debug,
                       .debug_timestamps = debug_timestamps});
  if (debug_log) server->log_to(std::move(debug_log));
  // The session guards an attached program with its watchdog (which the target gives its int3s
  // too): a failure to start it is told.
  if (session && session->guard_error()) {
    std::cerr << "hwarb gdbserver: warning: no watchdog (" << session->guard_error()->to_string()
              << "): if the server is killed, the program may die of its breakpoints\n";
  }
  // One client after another while the server stays (extended mode without --once).
  Result<native::GdbServerEnd> end = native::GdbServerEnd{};
  for (bool first = true;; first = false) {
    native::Fd connection;
    if (listen) {
      auto port = native::local_port(listener.get());
      if (first) {
        std::cerr << "hwarb gdbserver: listening on port " << (port ? *port : listen->second)
                  << "\n";
      }
      auto accepted = native::accept_one(listener.get());
      if (!accepted && accepted.error().code() == ErrorCode::kIntr &&
          native::interrupt_requested()) {
        // SIGINT, SIGTERM or SIGHUP while no client is connected: the server ends as it does
        // with one (the process is let go as the last client left it, by the destructors).
        end = native::GdbServerEnd{.how = native::GdbServerEnd::How::kInterrupted};
        break;
      }
      if (!accepted) {
        end = std::unexpected(accepted.error());
        break;
      }
      connection = std::move(*accepted);
      // --once: no second client, so the port is given back at once, as gdbserver closes its
      // socket after the first connection (another server may take the port; a client that
      // connects to it meanwhile is refused, not left in a backlog nobody accepts from).
      if (args.once) listener = native::Fd();
      server->connect(connection.get(), connection.get());
    }
    end = server->serve();
    if (!end || !end->serving || !listen) break;
    std::cerr << "hwarb gdbserver: the client went away; waiting for the next one\n";
  }
  if (server->watchdog_error()) {
    std::cerr << "hwarb gdbserver: warning: the watchdog missed a change ("
              << server->watchdog_error()->to_string() << ")\n";
  }
  if (!end) return fail(end.error().to_string(), kExitFailure);
  const char* how = end->how == native::GdbServerEnd::How::kDetached      ? "detached"
                    : end->how == native::GdbServerEnd::How::kKilled      ? "killed"
                    : end->how == native::GdbServerEnd::How::kInterrupted ? "interrupted"
                                                                          : "the client went away";
  std::cerr << "hwarb gdbserver: " << how;
  if (end->exited) {
    std::cerr << "; the program "
              << (end->signal != 0 ? "was killed by signal " + std::to_string(end->signal)
                                   : "exited with status " + std::to_string(end->status));
  }
  std::cerr << "\n";
  if (end->how == native::GdbServerEnd::How::kDetached && !end->exited && started > 0 &&
      !args.multi) {
    // As gdbserver: the server stays until the program it started and the client let go ends.
    // Were the server, the leader of the terminal's session (as under gdb's testsuite), to end
    // first, the kernel would send that program's process group SIGHUP.
    server.reset();
    session.reset();
    inferior.reset();
    // A signal to the server ends the wait (and the server), as it does gdbserver's.
    native::RunResult joined;
    (void)native::wait_end(started, false, joined);
  }
  return kExitOk;
}

}  // namespace

CommandRunner setup_gdbserver(CLI::App& app) {
  auto args = std::make_shared<ServerArgs>();
  CLI::App* sub = app.add_subcommand(
      "gdbserver",
      "serve a real process to gdb, lldb or an IDE over the GDB remote protocol, with watchpoints "
      "of any number and size");
  sub->add_option("connection", args->where,
                  "COMM: HOST:PORT to listen on (e.g. 127.0.0.1:1234 or :1234), or stdio / - for "
                  "standard input and output");
  sub->add_flag("--stdio", args->stdio, "talk on standard input and output");
  sub->add_flag("--software", args->software,
                "watchpoints in software even where debug-register hits are delivered");
  sub->add_flag("--once", args->once,
                "serve one client, then end (also in extended mode; without extended mode the "
                "server ends at a disconnect anyway)");
  sub->add_flag("--attach", args->attach, "gdbserver's form: the argument after COMM is a PID");
  sub->add_flag("--selftest", args->selftest,
                "gdbserver's option: says, as a gdbserver built without them does, that there are "
                "no built-in unit tests (hwarb's tests are its test suite), and ends");
  sub->add_flag("--multi", args->multi,
                "extended-remote mode from the start: the program is optional (the client runs "
                "or attaches one), and the server stays for the next client until `monitor "
                "exit`");
  sub->add_option("--wrapper", args->wrapper,
                  "gdbserver's --wrapper WRAPPER... --: each program runs through the wrapper "
                  "command (e.g. --wrapper env FOO=1 --), stopped once the wrapper execs it");
  sub->add_flag("--no-disable-randomization", args->keep_aslr, "gdbserver's name of --aslr");
  sub->add_option("--disable-packet", args->disable_packets,
                  "gdbserver's testing option: OPT1[,OPT2...] of vCont, T (S stop replies), "
                  "Tthread (stop replies without thread:), qC, qfThreadInfo, threads (all but "
                  "T)");
  sub->add_flag("--disable-randomization", args->no_aslr,
                "address-space randomisation off for the program (the default)");
  sub->add_flag("--startup-with-shell", args->with_shell,
                "run each program as gdbserver does, through $SHELL (or /bin/sh): `SHELL -c "
                "'exec PROG ARGS'`, every character special to the shell escaped (the default)");
  sub->add_flag("--no-startup-with-shell", args->without_shell,
                "run each program directly, without a shell (gdb: set startup-with-shell off)");
  sub->add_flag("--debug", args->debug,
                "gdbserver's option: log the server's events on standard error (as `monitor set "
                "debug 1`)");
  sub->add_flag("--remote-debug", args->remote_debug,
                "gdbserver's option: log the packets too (as `monitor set remote-debug 1`)");
  sub->add_flag("--event-loop-debug", args->event_loop_debug,
                "gdbserver's option: accepted; hwarb's log has no more to say");
  sub->add_option("--debug-file", args->debug_file,
                  "gdbserver's option: the log lines go to FILE (made or truncated) instead of "
                  "standard error");
  sub->add_option("--debug-format", args->debug_format,
                  "gdbserver's option: all, none or timestamp (each log line prefixed with the "
                  "time)");
  add_target_options(*sub, args->target);
  // gdbserver's form: everything after COMM is the program and its own arguments.
  sub->prefix_command();
  sub->footer(
      "Target: PROG [ARGS] or --attach PID after COMM (gdbserver's form), or -p PID | -- COMMAND "
      "[ARGS]; none with --multi. gdb: target remote | hwarb gdbserver stdio prog, or target "
      "remote :1234; with --multi, target extended-remote :1234, then set remote exec-file PROG "
      "and run, or attach PID. Whoever "
      "can connect controls the program: listen on 127.0.0.1 unless the network is trusted. "
      "Exit status: 0 done, 1 the target could not be traced or the server failed, 2 usage "
      "error.");
  return [args, sub]() {
    args->rest = sub->remaining();
    if (!args->rest.empty()) {
      // gdbserver's form: a "--" after PROG is one of the program's arguments.
      for (std::string& word : take_trailing_words()) args->rest.push_back(std::move(word));
    }
    return run_server(*args);
  };
}

}  // namespace hwarb::cli
