#!/bin/bash
# First device call: unpack the llama.cpp source carried in .dualpath/gpuA, start the CUDA
# llama-server build and the random-weight model writer in the background (setsid: they
# outlive the call), keep the wheels carried in this call under $G/wh (poll.sh installs them
# with the next call's), print the machine.
# usage (device, repo root): bash bench/gpu/setup.sh .dualpath/gpuA
G=${G:-/tmp/gpu}; W=$PWD; C=$1
mkdir -p $G/wh && cd $G
if [ ! -d llama.cpp ]; then
  tar xzf $W/$C/llama-src.tgz && cp $W/$C/random_gguf.py $G/
  setsid bash -c "cd $G && cmake -S llama.cpp -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF > build.log 2>&1 && \
    cmake --build build --target llama-server -j16 >> build.log 2>&1; echo \$? > build.rc" \
    < /dev/null > /dev/null 2>&1 &
  # Qwen3-MoE shape, 8 layers: 2048 embd, 128 experts (8 used), expert ffn 768, 16 q / 4 kv
  # heads of 128, F16: ~11 GB
  setsid bash -c "cd $G && PYTHONPATH=$G/llama.cpp/gguf-py python3 random_gguf.py \
    llama.cpp/models/ggml-vocab-qwen2.gguf moe8.gguf --arch qwen3moe --layers 8 --embd 2048 \
    --ffn 6144 --heads 16 --heads-kv 4 --ctx 131072 --experts 128 --experts-used 8 \
    --expert-ffn 768 > model.log 2>&1; echo \$? > model.rc" < /dev/null > /dev/null 2>&1 &
fi
cd $W
cp $C/*.whl $G/wh/ 2>/dev/null
python3 -V; nproc; free -g | head -2; df -h /tmp | tail -1
nvidia-smi --query-gpu=name,memory.used,memory.total,driver_version --format=csv
