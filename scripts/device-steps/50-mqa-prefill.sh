# Prefill MQA logits (issue 26, item 2: the keys-on-M coopmat kernel),
# sourced by scripts/device-run.sh (uses its step / wait_steps / report, $B
# and $OUT). About two minutes.
#
# Correctness first, in parallel (each process checks its own outputs
# against the cpu reference and exits non-zero on any mismatch):
#   mqa_planner   every MQA parity case with the planner's choice,
#                 including the eight one-row cases (mqa_logits/80..87,
#                 pinned to one row per workgroup through the experimental
#                 geometry pins) and the ten named geometries (90..99);
#   mqa_coopmat   every case on the matrix path (a refusal names its gate:
#                 D 512, H not a multiple of 16 or one row's heads past the
#                 workgroup's pairs);
#   mqa_onerow    every case on the matrix path at one row per workgroup
#                 (QATTN_MQA_RPW=1): the geometry that gave wrong results
#                 in the previous kernel on this GPU.
# A coopmat plan is refused by the Vulkan backend unless the fragment
# probe found the layout the kernel is written for (the parity header line
# names the matrix shapes; a refusal says "refused by the backend").
# Then alone on the GPU: qattn-bench on the four prefill presets (each line
# with the matrix ceiling of the plan's tile shape measured in the same run
# and its share of it), and qattn_mqa_tune with --sweep (slices and rows per
# workgroup around the planner's plan on the H 64 and H 32 targets), every
# timing spot-checked.
step mqa_planner 150 "$B/tests/qattn_parity" --backend vulkan --no-validation --op mqa_logits
step mqa_coopmat 150 "$B/tests/qattn_parity" --backend vulkan --no-validation --op mqa_logits --variant coopmat
step mqa_onerow 150 env QATTN_MQA_RPW=1 "$B/tests/qattn_parity" --backend vulkan --no-validation \
  --op mqa_logits --variant coopmat
wait_steps
TAIL=4 report mqa_planner mqa_coopmat mqa_onerow
step mqa_bench 90 "$B/bench/qattn-bench" --backend vulkan \
  --preset mqa_1024x131072_h64,mqa_1024x131072_h32,mqa_2048x65536_h64,mqa_4096x32768_h64 \
  --iters ${ITERS:-30} --read-mib 0
wait_steps
TAIL=12 report mqa_bench
step mqa_tune 150 "$B/tests/qattn_mqa_tune" --runs 7 --sweep
wait_steps
TAIL=24 report mqa_tune
