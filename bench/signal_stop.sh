#!/bin/bash
# time from SIGTERM to exit (step finished, checkpoint + JSON written) of saturate train
S=${SATURATE:-build/saturate}
for model in mlp convnet; do for i in 1 2 3; do
  rm -rf ck_$model; 
  $S train --model $model --data fashion-mnist --device cpu --steps 100000 --batch 64 --log-every 5 --loss-every 1 --checkpoint-dir ck_$model --json s.json > /dev/null 2> s.err & pid=$!
  until grep -q "step   " s.err; do sleep 0.05; done
  t0=$(date +%s.%N); kill -TERM $pid; wait $pid; rc=$?; t1=$(date +%s.%N)
  ck=$(stat -c %s ck_$model/checkpoint.pt)
  echo "$model rc=$rc $(python3 -c "print(f'{($t1-$t0)*1000:.0f} ms')") checkpoint $ck bytes, after_step $(python3 -c "import json;print(json.load(open('s.json'))['interrupted']['after_step'])")"
done; done
