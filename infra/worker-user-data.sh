#!/bin/bash
# fleetwise worker bootstrap, run once as root at an instance's first boot (EC2 user data).
#
# src/cloud/aws/user-data.ts fills in every placeholder (a NAME in double braces) before launch; the values are validated to contain no
# quotes, spaces or newlines, so single-quoting them below is safe. The instance id is not known before launch: the
# script reads it from the instance metadata service (IMDSv2; the provider launches with HttpTokens=required).
#
# Works on Amazon Linux 2023 and on Debian/Ubuntu. For GPU types use an AMI with the NVIDIA driver and the NVIDIA
# container toolkit (e.g. an AWS Deep Learning Base AMI): the script wires the toolkit into Docker when it finds it.
# Everything here adds to an instance's launch delay; a pre-baked AMI (Docker, Node.js and fleetwise installed)
# makes the worker start much sooner.
set -euo pipefail
exec > >(tee -a /var/log/fleetwise-bootstrap.log) 2>&1
echo "fleetwise bootstrap starting at $(date -Is)"

# A bootstrap that fails leaves an instance that never registers, billed until the controller's registration timeout
# gives up on it. Power it off at once instead: the EC2 provider launches workers with
# InstanceInitiatedShutdownBehavior=terminate (src/cloud/aws/ec2-provider.ts), so this terminates the instance, and
# the controller sees it gone and places its tasks elsewhere. cloud-init copies this log to the console output
# (`aws ec2 get-console-output`), which outlives the instance for a while.
on_exit() {
  local status=$?
  if [ "${status}" -ne 0 ]; then
    echo "fleetwise bootstrap failed (exit ${status}) at $(date -Is); shutting the instance down" >&2
    shutdown -h now
  fi
}
trap on_exit EXIT

# Package installs can fail transiently at first boot (a mirror times out; cloud-init or unattended-upgrades holds
# apt's lock), so each is tried a few times before the bootstrap gives up.
retry() {
  local attempt
  for attempt in 1 2 3 4 5; do
    if "$@"; then return 0; fi
    echo "fleetwise: attempt ${attempt} of 5 failed: $*" >&2
    if [ "${attempt}" -lt 5 ]; then sleep $((attempt * 10)); fi
  done
  return 1
}

CONTROLLER_URL='{{CONTROLLER_URL}}'
WORKER_TOKEN='{{WORKER_TOKEN}}'
FLEETWISE_PACKAGE='{{FLEETWISE_PACKAGE}}'
NODE_VERSION='{{NODE_VERSION}}'

# --- Docker -------------------------------------------------------------------------------------------------------
if ! command -v docker >/dev/null 2>&1; then
  if command -v dnf >/dev/null 2>&1; then
    retry dnf install -y docker
  elif command -v apt-get >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    # Wait up to two minutes for another apt/dpkg to let go of its lock rather than failing at once.
    retry apt-get -o DPkg::Lock::Timeout=120 update -y
    retry apt-get -o DPkg::Lock::Timeout=120 install -y docker.io curl xz-utils
  else
    echo "fleetwise: no supported package manager (dnf or apt-get) to install Docker" >&2
    exit 1
  fi
fi
if command -v nvidia-ctk >/dev/null 2>&1; then
  nvidia-ctk runtime configure --runtime=docker
fi
systemctl enable docker
systemctl restart docker

# --- Node.js (official binaries: distribution packages are often older than fleetwise's minimum) -------------------
# fleetwise runs on Node.js ^20.19.0 || >=22.12.0 (package.json's engines); a node outside that range, or one whose
# version cannot be read, is replaced.
node_supported() {
  local version major minor
  version="$(node -p 'process.versions.node' 2>/dev/null)" || return 1
  [[ "${version}" =~ ^([0-9]+)\.([0-9]+)\.[0-9]+$ ]] || return 1
  major=$((10#${BASH_REMATCH[1]}))
  minor=$((10#${BASH_REMATCH[2]}))
  [ "${major}" -eq 20 ] && [ "${minor}" -ge 19 ] && return 0
  [ "${major}" -eq 22 ] && [ "${minor}" -ge 12 ] && return 0
  [ "${major}" -ge 23 ]
}
if ! command -v node >/dev/null 2>&1 || ! node_supported; then
  case "$(uname -m)" in
    x86_64) NODE_ARCH=x64 ;;
    aarch64) NODE_ARCH=arm64 ;;
    *) echo "fleetwise: unsupported architecture $(uname -m)" >&2; exit 1 ;;
  esac
  curl -fsSL --retry 5 "https://nodejs.org/dist/v${NODE_VERSION}/node-v${NODE_VERSION}-linux-${NODE_ARCH}.tar.xz" \
    | tar -xJ -C /usr/local --strip-components=1
  # An older node earlier on PATH would still be the one that runs fleetwise.
  if ! node_supported; then
    echo "fleetwise: node is $(command -v node) $(node --version 2>&1 || true) after installing Node.js ${NODE_VERSION}; fleetwise needs ^20.19.0 || >=22.12.0" >&2
    exit 1
  fi
fi

# --- fleetwise ----------------------------------------------------------------------------------------------------
retry npm install --global --no-fund --no-audit "${FLEETWISE_PACKAGE}"

# --- this instance's id, from IMDSv2 ------------------------------------------------------------------------------
IMDS=http://169.254.169.254/latest
IMDS_TOKEN="$(curl -fsS --retry 5 -X PUT "${IMDS}/api/token" -H 'X-aws-ec2-metadata-token-ttl-seconds: 300')"
INSTANCE_ID="$(curl -fsS --retry 5 -H "X-aws-ec2-metadata-token: ${IMDS_TOKEN}" "${IMDS}/meta-data/instance-id")"

# The address other workers reach this one's latency probe at: its private IPv4. Left to the controller, it would be
# the address the worker's heartbeats come from, which behind a load balancer or proxy is the balancer's. Without one
# (an IPv6-only subnet, a metadata read that failed) the worker starts all the same, without the flag.
PROBE_HOST_FLAG=''
if LOCAL_IPV4="$(curl -fsS --retry 5 -H "X-aws-ec2-metadata-token: ${IMDS_TOKEN}" "${IMDS}/meta-data/local-ipv4")" \
  && [[ "${LOCAL_IPV4}" =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]]; then
  PROBE_HOST_FLAG=" --probe-host ${LOCAL_IPV4}"
else
  echo "fleetwise: no private IPv4 address from the instance metadata; the controller takes the latency probe's address as the one it sees" >&2
fi

# --- the worker, as a service that restarts on failure -------------------------------------------------------------
# The worker token goes into this root-only file, read by the worker as FLEETWISE_WORKER_TOKEN: on the command line
# it would be readable by every process on the host (/proc/<pid>/cmdline). It is not enough to register: the worker
# also sends this instance's identity document, signed by AWS (IMDSv2), which the controller verifies; the
# per-instance token it gets back is kept in its work directory, so a restart (Restart=always) registers with that.
install -d -m 0700 /etc/fleetwise /var/lib/fleetwise-worker
cat > /etc/fleetwise/worker.env <<ENV
CONTROLLER_URL=${CONTROLLER_URL}
FLEETWISE_WORKER_TOKEN=${WORKER_TOKEN}
INSTANCE_ID=${INSTANCE_ID}
ENV
chmod 0600 /etc/fleetwise/worker.env

# Tasks run in Docker containers, never as processes on the host: `--executor auto` would fall back to the process
# executor if Docker did not answer when the worker started, running tasks as root next to the metadata service (and
# so within reach of the worker token). The unit requires docker.service and restarts the worker if it fails.
FLEETWISE_BIN="$(command -v fleetwise)"
cat > /etc/systemd/system/fleetwise-worker.service <<UNIT
[Unit]
Description=fleetwise worker
After=docker.service network-online.target
Wants=network-online.target
Requires=docker.service

[Service]
EnvironmentFile=/etc/fleetwise/worker.env
ExecStart=${FLEETWISE_BIN} worker --executor docker --controller \${CONTROLLER_URL} --instance-id \${INSTANCE_ID} --work-dir /var/lib/fleetwise-worker${PROBE_HOST_FLAG}
Restart=always
RestartSec=5
# 3: the controller retired this instance (it was replaced); started again, the worker would be told so again.
RestartPreventExitStatus=3

[Install]
WantedBy=multi-user.target
UNIT
systemctl daemon-reload
systemctl enable --now fleetwise-worker.service
echo "fleetwise worker ${INSTANCE_ID} started at $(date -Is), controller ${CONTROLLER_URL}"
