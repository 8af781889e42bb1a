#!/bin/bash
# Vulkan beside CUDA on one H200 (bench/gpu/README.md, 2026-12-06), first device call:
# unpack the Vulkan loader (Debian bookworm, into / as the device's README says), and the
# build's Vulkan headers, glslc and SPIRV-Headers (Debian trixie, into $G/vkroot: bookworm's
# glslc 2023.2 lacks GL_KHR_cooperative_matrix, GL_NV_cooperative_matrix2 and
# GL_EXT_integer_dot_product, so its build would leave the GPU's matrix cores unused; bookworm's
# is the fallback where trixie's will not run); start the Vulkan and the CUDA llama-server
# builds side by side and the model writer under setsid (they outlive the call); then follow
# the builds for up to SECONDS.
# usage (device, repo root): bash bench/gpu/setup_vulkan.sh CARRIED_DIR SECONDS
G=${G:-/tmp/gpu}; W=$PWD; C=$1; S=${2:-520}
mkdir -p $G/wh && cd $G
ldd --version | head -1; nproc; cmake --version | head -1
if [ ! -d llama.cpp ]; then
  for f in $W/$C/debs/*.deb; do dpkg -x $f /; done; ldconfig
  mkdir -p vkroot; for f in $W/$C/debsT/*.deb; do dpkg -x $f vkroot; done
  L=$G/vkroot/usr/lib/x86_64-linux-gnu
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' $L $G/vkroot/usr/bin/glslc > glslc
  chmod +x glslc
  if ! ./glslc --version > glslc.txt 2>&1; then
    cat glslc.txt; echo "trixie glslc does not run here: bookworm's instead"
    rm -rf vkroot; mkdir -p vkroot; for f in $W/$C/debsB/*.deb; do dpkg -x $f vkroot; done
    ./glslc --version > glslc.txt 2>&1
  fi
  head -3 glslc.txt
  tar xzf $W/$C/llama-src.tgz && cp $W/$C/random_gguf.py $G/
  COMMON="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF"
  setsid bash -c "cd $G && cmake -S llama.cpp -B build-vk -DGGML_VULKAN=ON $COMMON \
    -DVulkan_INCLUDE_DIR=$G/vkroot/usr/include -DVulkan_LIBRARY=$L/libvulkan.so \
    -DVulkan_GLSLC_EXECUTABLE=$G/glslc -DSPIRV-Headers_DIR=$G/vkroot/usr/share/cmake/SPIRV-Headers \
    > vk.log 2>&1 && cmake --build build-vk --target llama-server -j16 >> vk.log 2>&1; echo \$? > vk.rc" \
    < /dev/null > /dev/null 2>&1 &
  setsid bash -c "cd $G && cmake -S llama.cpp -B build-cuda -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    $COMMON > cuda.log 2>&1 && cmake --build build-cuda --target llama-server -j16 >> cuda.log 2>&1; \
    echo \$? > cuda.rc" < /dev/null > /dev/null 2>&1 &
  # the earlier nights' model: Qwen3-MoE shape, 8 layers, 2048 embd, 128 experts (8 used),
  # expert ffn 768, 16 q / 4 kv heads, F16, ~11 GB
  setsid bash -c "cd $G && PYTHONPATH=$G/llama.cpp/gguf-py python3 random_gguf.py \
    llama.cpp/models/ggml-vocab-qwen2.gguf moe8.gguf --arch qwen3moe --layers 8 --embd 2048 \
    --ffn 6144 --heads 16 --heads-kv 4 --ctx 131072 --experts 128 --experts-used 8 \
    --expert-ffn 768 > model.log 2>&1; echo \$? > model.rc" < /dev/null > /dev/null 2>&1 &
fi
cp $W/$C/whl/*.whl $G/wh/ 2>/dev/null
end=$((SECONDS + S))
while [ $SECONDS -lt $end ] && ! { [ -f vk.rc ] && [ -f cuda.rc ] && [ -f model.rc ]; }; do
  sleep 20; echo "$(date +%T) vk: $(tail -c 300 vk.log | tr '\r' '\n' | tail -1 | cut -c1-110)"
  echo "$(date +%T) cuda: $(tail -c 300 cuda.log | tr '\r' '\n' | tail -1 | cut -c1-110)"
done
for b in vk cuda model; do echo "$b rc=$(cat $b.rc 2>/dev/null)"; done
grep -E "Vulkan|glslc|supported|SPIRV|Error|error" vk.log | head -30
[ "$(cat vk.rc 2>/dev/null)" = 0 ] || tail -30 vk.log
[ "$(cat cuda.rc 2>/dev/null)" = 0 ] || tail -5 cuda.log
tar czf $OUT/build.tgz vk.log cuda.log model.log glslc.txt 2>/dev/null
