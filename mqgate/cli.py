"""The `mqgate` command: `serve`, `namesrv`, `config`, `store stats`, `passwd`, `connect`, `rules`, `events` and
`admin`.

Exit codes: 0 on success (and after a clean stop on SIGTERM/SIGINT), 1 when the store cannot be used (locked by
another process, missing, unreadable; or a config file of the broker under the data directory) or `passwd` cannot
change the password file, 2 for a bad command line or configuration; `rules test` answers as grep: 0 match,
1 no match, 2 an invalid pattern or event.
"""

from __future__ import annotations

import argparse
import dataclasses
import getpass
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.table import Table

from core import CoreError, FlushMode, MessageStore, RecoveryReport, StorageError, open_store
from mqgate.commands.admin import add_admin_parser
from mqgate.commands.connect import add_connect_parser
from mqgate.commands.events import add_events_parser
from mqgate.commands.namesrv import add_namesrv_parser
from mqgate.commands.rules import add_rules_parser
from mqgate.commands.terminal import stdout_console
from mqgate.config.reference import render_reference
from mqgate.config.settings import (
    CONFIG_FILE_NAME,
    DEFAULT_DATA_DIR,
    FLAGS,
    LOG_LEVELS,
    STORE_SUBDIR,
    ConfigError,
    Override,
    Settings,
    load_settings,
    render_toml,
)
from mqgate.process import configure_logging, run
from mqtt_bridge.access.password_file import DEFAULT_ITERATIONS, delete_user, hash_plain_passwords, set_password
from mqtt_bridge.errors import ConfigError as MqttConfigError

log = logging.getLogger(__name__)

PROG = "mqgate"
EXIT_OK = 0
EXIT_STORE = 1
EXIT_USAGE = 2
# `passwd`: the password file was left as it was (mosquitto_passwd exits 1 for these too).
EXIT_NOT_CHANGED = 1
# What a shell reports for a process ended by SIGINT (128 + 2); used when Ctrl-C comes before the loop runs.
EXIT_INTERRUPTED = 130
# What a shell reports for a process ended by SIGPIPE (128 + 13): the reader of standard output went away.
EXIT_READER_GONE = 141

DESCRIPTION = """\
mqgate: an MQTT and EventBridge protocol gateway in Python on a broker core after Apache RocketMQ.
`mqgate serve` runs in one process: the message store and broker core; the MQTT listener (TCP, and TLS and
WebSocket when configured); the RocketMQ 5 gRPC endpoint; RocketMQ 4's NameServer and the broker's remoting
port; EventBridge (buses, YAML rules in DATA_DIR/rules, HTTP, topic, MQTT and bus targets); the connector runtime
(file source and sink, HTTP sink, Spark sink writing Parquet); and the HTTP port of their REST APIs."""

EPILOG = f"""\
subcommands in detail:
  serve         open the store in DATA_DIR/{STORE_SUBDIR} (recovering after a crash) and every listener, print
                one line "ready store=... recovery=clean|scan mqtt=... grpc=... remoting=... namesrv=...
                http=..." on stdout, run until SIGTERM or SIGINT, close cleanly
  namesrv       run a NameServer alone (as RocketMQ's mqnamesrv); print "ready namesrv=HOST:PORT", run until
                SIGTERM or SIGINT
  config        print the effective configuration (defaults, then the file, then flags) as TOML;
                --reference: every key with its type, default, flag and meaning (docs/configuration.md)
  store stats   open the store, print its statistics and the recovery report, close it
  passwd        add, change or delete users of a Mosquitto password file (as mosquitto_passwd)
  connect       list, create, pause, resume, restart and delete connectors through the REST API
  rules test    does an event (JSON file) match an EventBridge pattern (JSON file)? exit 0 yes, 1 no, 2 invalid
  rules list    the rules of a running mqgate serve, and the rule files it refused with their errors
  events        replay a bus's events in a time range; list and redrive dead letters (through the REST API)
  admin         topics, consumer groups and their lag, clients, messages, dead letters and the store of a
                running mqgate serve (its admin API), as RocketMQ's mqadmin

configuration:
  Values come from built-in defaults, then a file (--config PATH, or DATA_DIR/{CONFIG_FILE_NAME} when it
  exists; TOML, or YAML for .yaml/.yml), then flags. See `mqgate config` for every key and its default.

examples:
  mqgate serve --data-dir ./data
  mqgate serve --data-dir /srv/mqgate --flush-mode SYNC_FLUSH --segment-size 256MiB
  mqgate namesrv --port 9876
  mqgate config --data-dir ./data --config examples/mqgate.toml
  mqgate store stats --data-dir ./data
  mqgate passwd -c /etc/mqgate/passwd alice
  mqgate connect list --url http://127.0.0.1:8082
  mqgate rules test examples/pattern.json examples/event.json
  mqgate connect create examples/file-sink.yaml
  mqgate admin consumer progress billing
  mqgate events replay --bus default --from 2024-05-01T12:00:00Z --to 2024-05-01T13:00:00Z

exit codes: 0 success or clean stop, 1 store unusable (e.g. open in another process), 2 bad usage or config"""

SETTINGS_EPILOG = f"""\
Precedence: flags win over the configuration file, the file over the defaults. Without --config,
DATA_DIR/{CONFIG_FILE_NAME} is read when it exists."""


def _settings_options() -> argparse.ArgumentParser:
    """The options every subcommand takes to build its Settings."""
    options = argparse.ArgumentParser(add_help=False)
    group = options.add_argument_group("settings")
    group.add_argument(
        "--data-dir",
        type=Path,
        default=DEFAULT_DATA_DIR,
        metavar="DIR",
        help=f"data directory; the store is DIR/{STORE_SUBDIR} (default: ./{DEFAULT_DATA_DIR})",
    )
    group.add_argument(
        "--config",
        type=Path,
        metavar="PATH",
        help=f"configuration file, .toml or .yaml/.yml (default: DIR/{CONFIG_FILE_NAME} if it exists)",
    )
    group.add_argument(
        "--flush-mode",
        choices=[mode.value for mode in FlushMode],
        help="ASYNC_FLUSH acknowledges once in the page cache; SYNC_FLUSH after fdatasync (store.flush_mode)",
    )
    group.add_argument(
        "--segment-size",
        metavar="SIZE",
        help='commit-log segment size in bytes or with a binary unit, e.g. "64MiB", "1GiB" (store.segment_size)',
    )
    group.add_argument(
        "--auto-create-topic",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="create topics on first send (broker.auto_create_topic; on by default, turn it off in production)",
    )
    group.add_argument(
        "--broker-name",
        metavar="NAME",
        help="the broker group's name in routes and message queues (broker.broker_name; default broker-a)",
    )
    group.add_argument(
        "--cluster-name",
        metavar="NAME",
        help="the cluster the broker registers in (broker.cluster_name; default DefaultCluster)",
    )
    group.add_argument(
        "--namesrv-addr",
        metavar="'HOST:PORT;HOST:PORT'",
        help="NameServers to register with, as RocketMQ's namesrvAddr (broker.namesrv_addr; default: none, and"
        " serve runs one in its process)",
    )
    group.add_argument(
        "--broker-id",
        type=int,
        metavar="N",
        help="0 for the broker group's master, 1, 2, ... for its slaves (broker.broker_id; default 0)",
    )
    group.add_argument(
        "--role",
        metavar="ROLE",
        help="ASYNC_MASTER, SYNC_MASTER or SLAVE (broker.broker_role; default ASYNC_MASTER)",
    )
    group.add_argument(
        "--etcd",
        metavar="'HOST:PORT;HOST:PORT'",
        help="automatic failover: the etcd that elects the broker group's master (controller.etcd_endpoints;"
        " default: none)",
    )
    group.add_argument(
        "--mqtt-port",
        type=int,
        metavar="N",
        help="MQTT listener port; 0 picks a free one, named in the ready line (mqtt.port; default 1883)",
    )
    group.add_argument(
        "--grpc-port",
        type=int,
        metavar="N",
        help="RocketMQ 5 gRPC port; 0 picks a free one, named in the ready line (grpc.port; default 8081)",
    )
    group.add_argument(
        "--remoting-port",
        type=int,
        metavar="N",
        help="RocketMQ 4 remoting port of the broker; 0 picks a free one, named in the ready line (remoting.port;"
        " default 10911)",
    )
    group.add_argument(
        "--namesrv-port",
        type=int,
        metavar="N",
        help="port of the embedded NameServer; 0 picks a free one, named in the ready line (namesrv.port;"
        " default 9876)",
    )
    group.add_argument(
        "--http-port",
        type=int,
        metavar="N",
        help="HTTP port of the REST APIs; 0 picks a free one, named in the ready line (http.port; default 8082)",
    )
    group.add_argument(
        "--log-level",
        type=str.upper,
        choices=LOG_LEVELS,
        metavar="LEVEL",
        help=f"logging on stderr: {', '.join(LOG_LEVELS)} (log_level; default INFO)",
    )
    return options


def build_parser() -> argparse.ArgumentParser:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(prog=PROG, description=DESCRIPTION, epilog=EPILOG, formatter_class=formatter)
    commands = parser.add_subparsers(
        dest="command", metavar="{serve,namesrv,config,store,passwd,connect,rules,events,admin}", title="commands"
    )
    options = _settings_options()

    serve_parser = commands.add_parser(
        "serve",
        parents=[options],
        formatter_class=formatter,
        help="run the gateway until SIGTERM/SIGINT",
        description=(
            f"Open the store in DATA_DIR/{STORE_SUBDIR} (recovering it after a crash), the broker, the MQTT\n"
            "listeners, the gRPC endpoint, the NameServer and the broker's remoting port (RocketMQ 4),\n"
            "EventBridge, the connector runtime and the HTTP port; print one line\n"
            '"ready store=ABS_PATH recovery=clean|scan mqtt=HOST:PORT grpc=HOST:PORT remoting=HOST:PORT\n'
            'namesrv=HOST:PORT http=HOST:PORT" on stdout (a part that is turned off is not named), then run\n'
            "until SIGTERM or SIGINT and close everything cleanly (the store last: flush, checkpoint, remove\n"
            "the abort marker)."
        ),
        epilog=SETTINGS_EPILOG + "\n\nExit codes: 0 after a clean stop, 1 if the store is open in another process"
        " or unusable,\n2 for a bad configuration.",
    )
    serve_parser.set_defaults(handler=cmd_serve)
    add_namesrv_parser(commands, formatter)

    config_parser = commands.add_parser(
        "config",
        parents=[options],
        formatter_class=formatter,
        help="print the effective configuration as TOML",
        description=(
            "Print the effective configuration as TOML: the defaults merged with the configuration file and\n"
            "the flags. Each value is commented with where it came from and what it means; the output is a\n"
            "valid configuration file."
        ),
        epilog=SETTINGS_EPILOG,
    )
    config_parser.add_argument(
        "--reference",
        action="store_true",
        help="print every key instead, with its type, default, flag and meaning, as Markdown (docs/configuration.md);"
        " takes no other option",
    )
    config_parser.set_defaults(handler=cmd_config, parser=config_parser)

    store_parser = commands.add_parser(
        "store",
        formatter_class=formatter,
        help="inspect the message store",
        description="Inspect the message store in DATA_DIR/store.",
    )
    store_commands = store_parser.add_subparsers(dest="store_command", metavar="{stats}", title="store subcommands")
    stats_parser = store_commands.add_parser(
        "stats",
        parents=[options],
        formatter_class=formatter,
        help="print store statistics and the recovery report",
        description=(
            "Open the store (recovering it if it was not closed cleanly), print its statistics and the\n"
            "recovery report as tables, and close it. Fails if `mqgate serve` has the store open."
        ),
        epilog=SETTINGS_EPILOG,
    )
    stats_parser.set_defaults(handler=cmd_store_stats)
    store_parser.set_defaults(handler=lambda _args: _usage_error(store_parser, "choose a store subcommand: stats"))
    _add_passwd_parser(commands, formatter)
    add_connect_parser(commands, formatter)
    add_rules_parser(commands, formatter)
    add_events_parser(commands, formatter)
    add_admin_parser(commands, formatter)
    return parser


PASSWD_DESCRIPTION = """\
Add a user to a Mosquitto password file or change its password, delete a user, or hash a file of plain-text
passwords, as mosquitto_passwd does. Passwords are hashed as $7$ (PBKDF2-SHA512), which Mosquitto 2 and
`mqgate serve` ([mqtt] password_file) read. The file is replaced atomically and keeps its mode (0600 when new)."""

PASSWD_EPILOG = """\
examples:
  mqgate passwd -c passwd alice            create the file with alice (asks for the password twice)
  mqgate passwd passwd bob                 add bob or change his password
  echo "$PW" | mqgate passwd --password-stdin passwd carol
  mqgate passwd -b passwd dave 'pa55'      batch mode: the password on the command line (visible in ps)
  mqgate passwd -D passwd bob              delete bob
  mqgate passwd -U plain.txt               hash every username:password line in place

Unlike mosquitto_passwd: a file that does not exist is an error without -c; -U leaves lines that are already
hashed alone (mosquitto_passwd would hash the hash); a malformed file is refused, naming its line.

Exit codes: 0 success, 1 the file was not changed (missing, unreadable or malformed file, user not found for -D,
passwords that differ, an unusable username or password), 2 bad command line."""


def _add_passwd_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], formatter: type[argparse.HelpFormatter]
) -> None:
    passwd = commands.add_parser(
        "passwd",
        formatter_class=formatter,
        help="manage a Mosquitto password file (as mosquitto_passwd)",
        description=PASSWD_DESCRIPTION,
        epilog=PASSWD_EPILOG,
        usage="%(prog)s [-c | -D | -U] [-b | --password-stdin] [--iterations N] FILE [USER [PASSWORD]]",
    )
    mode = passwd.add_mutually_exclusive_group()
    mode.add_argument("-c", dest="create", action="store_true", help="create the file, overwriting an existing one")
    mode.add_argument("-D", dest="delete", action="store_true", help="delete USER instead of setting a password")
    mode.add_argument("-U", dest="update", action="store_true", help="hash the plain-text passwords of FILE in place")
    source = passwd.add_mutually_exclusive_group()
    source.add_argument("-b", dest="batch", action="store_true", help="batch mode: PASSWORD is the third argument")
    source.add_argument(
        "--password-stdin", action="store_true", help="read the password from the first line of standard input"
    )
    passwd.add_argument(
        "--iterations",
        type=int,
        default=DEFAULT_ITERATIONS,
        metavar="N",
        help=f"PBKDF2 rounds (default {DEFAULT_ITERATIONS}, as mosquitto_passwd)",
    )
    passwd.add_argument("file", type=Path, metavar="FILE", help="the password file")
    passwd.add_argument("user", nargs="?", metavar="USER", help="the username")
    passwd.add_argument("password", nargs="?", metavar="PASSWORD", help="the password, with -b only")
    passwd.set_defaults(handler=cmd_passwd, parser=passwd)


class _PasswdRefused(Exception):
    """The password file was not changed; the message says why (exit code 1)."""


def cmd_passwd(args: argparse.Namespace) -> int:
    parser: argparse.ArgumentParser = args.parser
    if args.iterations < 1:
        return _usage_error(parser, f"--iterations {args.iterations}: must be a positive integer")
    try:
        if args.update:
            if args.user is not None or args.batch or args.password_stdin:
                return _usage_error(parser, "-U takes only FILE")
            count = hash_plain_passwords(args.file, iterations=args.iterations)
            print(f"{args.file}: hashed {count} password(s)", file=sys.stderr)
            return EXIT_OK
        if args.user is None:
            return _usage_error(parser, "USER is missing")
        if args.delete:
            if args.password is not None or args.batch or args.password_stdin:
                return _usage_error(parser, "-D takes FILE and USER, no password")
            if not delete_user(args.file, args.user):
                raise _PasswdRefused(f"user {args.user!r} is not in {args.file}; nothing deleted")
            return EXIT_OK
        if args.batch != (args.password is not None):
            return _usage_error(parser, "-b needs PASSWORD after USER" if args.batch else "PASSWORD needs -b")
        if not args.create and not args.file.exists():
            raise _PasswdRefused(f"password file {args.file}: does not exist; use -c to create it")
        set_password(args.file, args.user, _read_password(args), iterations=args.iterations, create=args.create)
    except (_PasswdRefused, ValueError) as exc:  # ValueError: an unusable username or password, or the file's
        return _fail(str(exc), EXIT_NOT_CHANGED)  # ConfigError (missing, unreadable, malformed: with its line)
    return EXIT_OK


def _read_password(args: argparse.Namespace) -> str:
    if args.batch:
        password: str = args.password
        return password
    if args.password_stdin:
        line = sys.stdin.readline()
        if not line:
            raise _PasswdRefused("--password-stdin: standard input is empty; give the password on its first line")
        return line.removesuffix("\n").removesuffix("\r")
    if not _has_terminal():  # getpass would warn (GetPassWarning) and read standard input with echo on
        raise _PasswdRefused("no terminal to ask for the password; use --password-stdin or -b to pass one")
    try:
        first = getpass.getpass("Password: ")
        second = getpass.getpass("Reenter password: ")
    except EOFError:
        raise _PasswdRefused("no password entered; use --password-stdin or -b to pass one without a prompt") from None
    if first != second:
        raise _PasswdRefused("the passwords do not match; nothing changed")
    return first


def _has_terminal() -> bool:
    """Whether the process has a controlling terminal, which getpass asks on (/dev/tty), whatever its standard
    input is."""
    try:
        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except OSError:
        return False
    os.close(fd)
    return True


def _usage_error(parser: argparse.ArgumentParser, message: str) -> int:
    parser.print_usage(sys.stderr)
    print(f"{parser.prog}: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def _fail(message: str, code: int) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return code


def os_error_message(exc: OSError, data_dir: Path | None) -> str:
    """The line for an OSError no part caught: the data directory is blamed only for a file under it."""
    if exc.filename is None or data_dir is None:
        return str(exc)
    path = Path(os.fsdecode(exc.filename)).resolve()
    if path.is_relative_to(data_dir.resolve()):
        return f"{exc}; check the data directory {data_dir} and its permissions"
    return str(exc)


def settings_from_args(args: argparse.Namespace) -> Settings:
    overrides = []
    for key, flag in FLAGS.items():
        value = getattr(args, flag.removeprefix("--").replace("-", "_"))
        if value is not None:
            shown = f"--no-{flag.removeprefix('--')}" if value is False else flag
            overrides.append(Override(key, value, shown))
    return load_settings(args.data_dir, args.config, overrides)


def cmd_serve(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    configure_logging(settings.log_level)

    def ready(line: str) -> None:
        print(line, flush=True)

    from mqgate.server import serve  # the doors and everything they need: only for the command that serves them

    run(serve(settings, ready))
    return EXIT_OK


def cmd_config(args: argparse.Namespace) -> int:
    if args.reference:
        given = [FLAGS[key] for key in FLAGS if getattr(args, FLAGS[key][2:].replace("-", "_")) is not None]
        given += ["--config"] * (args.config is not None) + ["--data-dir"] * (args.data_dir != DEFAULT_DATA_DIR)
        if given:
            return _usage_error(
                args.parser, f"--reference prints the defaults of every key; drop {', '.join(given)} (or --reference)"
            )
        sys.stdout.write(render_reference())
        return EXIT_OK
    settings = settings_from_args(args)
    sys.stdout.write(render_toml(settings))
    return EXIT_OK


def cmd_store_stats(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    configure_logging(settings.log_level)
    store_dir = settings.store.store_dir
    if not store_dir.is_dir():
        return _fail(
            f"no store at {store_dir}; check --data-dir, or run `mqgate serve --data-dir {settings.data_dir}` once",
            EXIT_STORE,
        )
    # It only reads: no index process for it (recovery, if the store crashed, rebuilds the index here as always).
    store = MessageStore(dataclasses.replace(settings.store, index_process=False))
    try:
        report = open_store(store)
    except StorageError as exc:
        if "another process" not in str(exc):
            raise
        # The running server has it: it answers the same question, and more, through its admin API.
        raise StorageError(f"{exc}; while mqgate serve runs, ask it: mqgate admin store stats") from exc
    try:
        stats = store.stats()
    finally:
        store.close()
    console = stdout_console()
    console.print(_stats_table(store_dir, stats))
    console.print(_recovery_table(report))
    return EXIT_OK


def _stats_table(store_dir: Path, stats: dict[str, int]) -> Table:
    table = Table(title=f"store {store_dir}", title_justify="left")
    table.add_column("statistic")
    table.add_column("value", justify="right")
    for key, value in stats.items():
        table.add_row(key, str(value))
    return table


def _recovery_table(report: RecoveryReport) -> Table:
    table = Table(title="recovery on open", title_justify="left")
    table.add_column("field")
    table.add_column("value", justify="right")
    table.add_row("clean", "yes" if report.clean else "no (log scanned)")
    table.add_row("start", str(report.start))
    table.add_row("end", str(report.end))
    table.add_row("records_scanned", str(report.records_scanned))
    table.add_row("truncated_bytes", str(report.truncated_bytes))
    table.add_row("corrupt_regions", str(len(report.corrupt)))
    for path, file_offset, skipped in report.corrupt:
        table.add_row("  corrupt", f"{path} @ {file_offset} ({skipped} bytes skipped)")
    table.add_row("consume_queue_entries_dropped", str(report.consume_queue_entries_dropped))
    table.add_row("seconds", f"{report.seconds:.3f}")
    return table


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parse_command_line(parser, argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        code: int = args.handler(args)
    except BrokenPipeError:
        return _reader_gone()
    except (ConfigError, MqttConfigError) as exc:  # the latter: a password or ACL file named in [mqtt]
        return _fail(str(exc), EXIT_USAGE)
    except CoreError as exc:
        return _fail(str(exc), EXIT_STORE)
    except OSError as exc:
        return _fail(os_error_message(exc, getattr(args, "data_dir", None)), EXIT_STORE)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    try:
        sys.stdout.flush()  # here, not at the interpreter's exit, where a closed pipe would print a traceback
    except BrokenPipeError:
        return _reader_gone()
    return code


def _reader_gone() -> int:
    """The reader of standard output has gone (`mqgate admin ... | head`): end quietly, as a Unix tool that SIGPIPE
    ends does, with the status a shell shows for one (128 + 13). Standard output is pointed at /dev/null first, so
    that the interpreter's own flush at exit finds nothing to complain about (Python's documented recipe)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_READER_GONE


def parse_command_line(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """`parser.parse_args`, except that an argument no parser knows is refused by the sub-command it was given to,
    with that sub-command's usage (`mqgate serve --bogus` shows `serve`'s, not the top level's); an option of an
    enclosing command given after its sub-command (`mqgate admin topic list --url U`) is named with where it goes."""
    chain: dict[int, list[argparse.ArgumentParser]] = {}
    _mark_sub_commands(parser, [parser], chain)
    args, extras = parser.parse_known_args(argv)
    if extras:
        parsers = chain.get(getattr(args, USAGE_PARSER, id(parser)), [parser])
        innermost = parsers[-1]
        message = f"unrecognized arguments: {' '.join(extras)}"
        for extra in extras:
            option = extra.partition("=")[0]
            owner = next((p for p in parsers[:-1] if option in p._option_string_actions), None)
            if owner is not None:
                message += f"; {option} is an option of `{owner.prog}`: give it before the sub-command"
                break
        innermost.error(message)
    return args


# The namespace attribute that names (by id) the innermost sub-command's parser; argparse copies a sub-parser's
# defaults over its parent's, so the innermost one's value is the one left.
USAGE_PARSER = "_usage_parser"


def _mark_sub_commands(
    parser: argparse.ArgumentParser,
    parents: list[argparse.ArgumentParser],
    chain: dict[int, list[argparse.ArgumentParser]],
) -> None:
    parser.set_defaults(**{USAGE_PARSER: id(parser)})
    chain[id(parser)] = parents
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # aliases map to the same parser
                _mark_sub_commands(sub, [*parents, sub], chain)


if __name__ == "__main__":
    sys.exit(main())
