# Prefill MQA logits (issue 20, items 4-5), sourced by scripts/device-run.sh
# (uses its step / wait_steps / report, $B and $OUT). About two minutes.
#
# Correctness first, in parallel (each process checks its own outputs
# against the cpu reference and exits non-zero on any mismatch):
#   mqa_planner      every MQA parity case with the planner's choice,
#                    including the eight one-row cases (mqa_logits/80..87,
#                    pinned to one row per workgroup through the
#                    experimental geometry pins);
#   mqa_coopmat      every case on the matrix path;
#   mqa_onerow       every case on the matrix path at one row per workgroup
#                    with the planner's m-tiles (QATTN_MQA_RPW=1: at
#                    D <= 128 one subgroup per workgroup), and
#   mqa_onerow_mt1   the same with one m-tile per subgroup (a row over H/16
#                    subgroups: the geometries that failed on the H200).
# Then alone on the GPU: qattn-bench on the four prefill presets (each line
# with the matrix ceiling measured in the same run and its share of it),
# and qattn_mqa_tune timing each preset with the planner's plan and with
# eight rows per workgroup at four m-tiles (rows share each decoded key
# tile among twice the subgroups), every timing spot-checked.
step mqa_planner 150 "$B/tests/qattn_parity" --backend vulkan --no-validation --op mqa_logits
step mqa_coopmat 150 "$B/tests/qattn_parity" --backend vulkan --no-validation --op mqa_logits --variant coopmat
step mqa_onerow 150 env QATTN_MQA_RPW=1 "$B/tests/qattn_parity" --backend vulkan --no-validation \
  --op mqa_logits --variant coopmat
step mqa_onerow_mt1 150 env QATTN_MQA_RPW=1 QATTN_MQA_MTILES=1 "$B/tests/qattn_parity" --backend vulkan \
  --no-validation --op mqa_logits --variant coopmat
wait_steps
TAIL=4 report mqa_planner mqa_coopmat mqa_onerow mqa_onerow_mt1
step mqa_bench 90 "$B/bench/qattn-bench" --backend vulkan \
  --preset mqa_1024x131072_h64,mqa_1024x131072_h32,mqa_2048x65536_h64,mqa_4096x32768_h64 \
  --iters ${ITERS:-30} --read-mib 0
wait_steps
TAIL=12 report mqa_bench
step mqa_tune 120 "$B/tests/qattn_mqa_tune" --runs 7 --geometry 4,0,8
wait_steps
TAIL=16 report mqa_tune
