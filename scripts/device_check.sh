#!/usr/bin/env bash
# The runtime pass, `modellint trace` and `modellint run` over the project's fixtures on a
# device (default cuda), each next to the same command on cpu, and whether they agree.
#
#   scripts/device_check.sh [--device cuda|cuda:N|cpu] [--out DIR]
#
# What a user compares with the CPU run: the same findings at the same lines, the same trace
# tables (shapes, parameters), the same `modellint run` findings and close losses. Outputs
# are compared once timings, device names and losses are masked; the losses are printed side
# by side. Under two or more GPUs, `modellint run -- torchrun --nproc-per-node 2` runs the DDP
# fixture with one GPU per rank (nccl); with `--device cpu` it runs with two gloo ranks, and
# every command runs on cpu twice (a check of the script itself, and of run-to-run noise).
# A baseline (`modellint run --record`) recorded and compared on each device must compare clean;
# the device's run compared with the cpu's baseline prints what differs (ML333: the device).
# Exit 0 when every pair agrees, 1 when one differs, 2 on a usage error.
set -u

device=cuda
out=""
while [ $# -gt 0 ]; do
    case "$1" in
        --device) device="${2:-}"; shift 2 || { echo "--device needs a value" >&2; exit 2; } ;;
        --device=*) device="${1#--device=}"; shift ;;
        --out) out="${2:-}"; shift 2 || { echo "--out needs a folder" >&2; exit 2; } ;;
        -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "device_check.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
case "$device" in
    cpu|cuda|cuda:[0-9]*) ;;
    *) echo "device_check.sh: --device is cpu, cuda or cuda:N, not '$device'" >&2; exit 2 ;;
esac

cd "$(dirname "$0")/.." || exit 2
python="${PYTHON:-python}"
gpus=$("$python" -c "import torch; print(torch.cuda.device_count())" 2>/dev/null) || {
    echo "device_check.sh: $python cannot import torch (set PYTHON=...)" >&2; exit 2; }
if [ "$device" != cpu ] && [ "$gpus" -eq 0 ]; then
    echo "device_check.sh: no CUDA device here (torch.cuda.device_count() is 0); use --device cpu" >&2
    exit 2
fi
out="${out:-$(mktemp -d "${TMPDIR:-/tmp}/device_check.XXXXXX")}"
mkdir -p "$out" || exit 2

echo "device_check: $device against cpu; torch $("$python" -c 'import torch; print(torch.__version__)'), $gpus GPU(s); outputs in $out"

# the runtime fixtures that build and run quickly (not the isolation ones that hang or
# crash on purpose, nor the 70B-parameter one)
runtime_files=(fixtures/runtime/*.py)
pairs=0
differ=0

normalise() {
    # timings, device names and losses vary between the two runs by design, and so does the
    # width of a trace table's device column (`cuda:0`, `cpu`)
    sed -E -e 's/[0-9]+(\.[0-9]+)? s\b/T s/g' -e 's/\bcuda(:[0-9]+)?\b/DEVICE/g' \
        -e 's/\bcpu\b/DEVICE/g' -e 's/last loss [-+0-9.einfa]+/last loss L/g' \
        -e 's/ {2,}/  /g' "$1"
}

# compare NAME -- COMMAND...: COMMAND run with DEV replaced by the device, then by cpu
compare() {
    local name="$1"; shift 2
    local on_device=() on_cpu=() word
    for word in "$@"; do
        on_device+=("${word//@DEV@/$device}")
        on_cpu+=("${word//@DEV@/cpu}")
    done
    echo
    echo "== $name"
    echo "   \$ ${on_device[*]}"
    MODELLINT_CHECK_DEVICE="$device" "${on_device[@]}" >"$out/$name.$device.txt" 2>&1
    local rc_device=$?
    MODELLINT_CHECK_DEVICE=cpu "${on_cpu[@]}" >"$out/$name.cpu.txt" 2>&1
    local rc_cpu=$?
    sed 's/^/   | /' "$out/$name.$device.txt"
    pairs=$((pairs + 1))
    normalise "$out/$name.$device.txt" >"$out/$name.$device.norm"
    normalise "$out/$name.cpu.txt" >"$out/$name.cpu.norm"
    local losses
    losses=$(paste -d' ' <(grep -o 'last loss [^,]*' "$out/$name.$device.txt" | cut -d' ' -f3) \
                         <(grep -o 'last loss [^,]*' "$out/$name.cpu.txt" | cut -d' ' -f3))
    [ -n "$losses" ] && echo "   last loss on $device, on cpu: $losses"
    if [ "$rc_device" -eq "$rc_cpu" ] && diff -q "$out/$name.cpu.norm" "$out/$name.$device.norm" >/dev/null; then
        echo "   -> same as on cpu (exit $rc_cpu)"
    else
        differ=$((differ + 1))
        echo "   -> DIFFERS from cpu (exit $rc_device on $device, $rc_cpu on cpu):"
        diff -u --label cpu --label "$device" "$out/$name.cpu.norm" "$out/$name.$device.norm" \
            | sed 's/^/   /'
    fi
}

ml=("$python" -m modellint)
compare runtime-pass -- "${ml[@]}" check --runtime --device @DEV@ --format concise \
    --no-cache -- "${runtime_files[@]}"
# a model that moves a tensor to the device its file picks at top level: clean on each (with
# --device cpu its process sees no GPU, and the file picks the cpu)
compare runtime-top-level-device -- "${ml[@]}" check --runtime --device @DEV@ --format concise \
    --no-cache -- fixtures/device/top_level_device.py
compare trace-lenet -- "${ml[@]}" trace --device @DEV@ fixtures/runtime/clean_lenet.py:LeNet
compare trace-text -- "${ml[@]}" trace --device @DEV@ fixtures/runtime/clean_text.py:TextClassifier
compare trace-shape-bug -- "${ml[@]}" trace --device @DEV@ \
    fixtures/runtime/channel_mismatch.py:TwoStageNet
compare run-bad -- "${ml[@]}" run --format concise -- "$python" fixtures/device/train_bad.py
compare run-good -- "${ml[@]}" run --format concise -- "$python" fixtures/device/train_good.py
# a baseline recorded and compared on the same device: clean on each
record_compare='"$0" -m modellint run --record "$1/baseline.$2.json" -- "$0" "$3" >/dev/null 2>&1 && "$0" -m modellint run --compare "$1/baseline.$2.json" --format concise -- "$0" "$3"'
rm -f "$out"/baseline.*.json
compare run-baseline -- bash -c "$record_compare" "$python" "$out" @DEV@ \
    fixtures/device/train_good.py
if [ "$device" != cpu ]; then  # the device's run against the cpu's baseline: ML333 (device)
    echo
    echo "== run-baseline-across: $device compared with the baseline recorded on cpu"
    MODELLINT_CHECK_DEVICE="$device" "${ml[@]}" run --compare "$out/baseline.cpu.json" \
        --format concise -- "$python" fixtures/device/train_good.py 2>&1 | grep ML33 \
        | sed 's/^/   | /'
fi
if ! command -v torchrun >/dev/null; then
    echo
    echo "== run-torchrun: skipped (no torchrun on PATH)"
elif [ "$device" = cpu ] || [ "$gpus" -ge 2 ]; then
    compare run-torchrun -- "${ml[@]}" run --format concise -- torchrun --nproc-per-node 2 \
        fixtures/device/ddp_bad.py
else
    echo
    echo "== run-torchrun: skipped ($gpus GPU; two ranks need two)"
fi

echo
echo "device_check: $((pairs - differ)) of $pairs commands give on $device what they give on cpu"
[ "$differ" -eq 0 ]
