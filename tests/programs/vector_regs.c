// vector_regs: AVX and AVX-512 registers for a debugger's register requests
// (gdbserver_vector_test.sh).
//   prog_vector_regs   loads ymm0 with the int32s 1..8 and clears ymm2; where the CPU has
//                      AVX-512F also zmm1 with 101..116, xmm17 with 201..204 and k1 with 0x5a5a.
//                      Then it passes the global label vectors_loaded (a breakpoint there sees
//                      them all), stores ymm2 and zmm1 as they are then (a debugger may have
//                      set them), and prints "ymm2[7]=N", "zmm1[15]=N" (or "zmm1[15]=-" without
//                      AVX-512F) and "avx512=0|1". Without AVX it prints "avx=0" and exits 0.
#include <stdio.h>

static const int y0[8] = {1, 2, 3, 4, 5, 6, 7, 8};
static const int z1[16] = {101, 102, 103, 104, 105, 106, 107, 108,
                           109, 110, 111, 112, 113, 114, 115, 116};
static const int x17[4] = {201, 202, 203, 204};
static int ymm2_out[8];
static int zmm1_out[16];

int main(void) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx")) {
    puts("avx=0");
    return 0;
  }
  const int avx512 = __builtin_cpu_supports("avx512f") ? 1 : 0;
  // One block, so that no compiled code runs between the loads, the label and the stores. The
  // AVX-512 registers (zmm16-31 and k0-7) are not clobbers: code compiled without -mavx512f
  // never uses them.
  __asm__ volatile(
      "vmovdqu (%[y0]), %%ymm0\n\t"
      "vpxor %%xmm2, %%xmm2, %%xmm2\n\t"
      "testl %[avx512], %[avx512]\n\t"
      "jz 1f\n\t"
      "vmovdqu32 (%[z1]), %%zmm1\n\t"
      "vmovdqu32 (%[x17]), %%xmm17\n\t"
      "movl $0x5a5a, %%eax\n\t"
      "kmovw %%eax, %%k1\n"
      "1:\n\t"
      ".globl vectors_loaded\n\t"
      ".type vectors_loaded, @function\n"
      "vectors_loaded:\n\t"
      "nop\n\t"
      "vmovdqu %%ymm2, (%[ymm2_out])\n\t"
      "testl %[avx512], %[avx512]\n\t"
      "jz 2f\n\t"
      "vmovdqu32 %%zmm1, (%[zmm1_out])\n"
      "2:\n\t"
      "vzeroupper\n\t"
      :
      : [y0] "r"(y0), [z1] "r"(z1), [x17] "r"(x17), [ymm2_out] "r"(ymm2_out),
        [zmm1_out] "r"(zmm1_out), [avx512] "r"(avx512)
      : "eax", "xmm0", "xmm1", "xmm2", "memory", "cc");
  printf("ymm2[7]=%d\n", ymm2_out[7]);
  if (avx512) {
    printf("zmm1[15]=%d\n", zmm1_out[15]);
  } else {
    puts("zmm1[15]=-");
  }
  printf("avx512=%d\n", avx512);
  return 0;
}
