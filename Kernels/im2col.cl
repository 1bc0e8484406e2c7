// The im2col matrices of a run of images, for the convolution weight gradient on CLBlast
// (OpenCLBackend+CLBlast.swift): dw = sum over images n of dy_n [Cout, P] . col_n^T, one GEMM per image.
//
// x [N, Cin, H, W] (one group); col holds `images` matrices [Cin*KH*KW, P] (P = Ho*Wo), image i of the
// run (image firstImage + i of x) at col + offCol + i * K * P, row (c, kh, kw), column (oh, ow) =
// x[n, c, oh*SH - PT + kh*DH, ow*SW - PL + kw*DW], zero outside the input.
// Grid: (P, Cin*KH*KW, images), any work-group shape.
__kernel void conv_im2col(__global const float* x, const int firstImage, __global float* col, const int offCol,
                          const int Cin, const int H, const int W, const int Ho, const int Wo,
                          const int KH, const int KW, const int SH, const int SW, const int DH, const int DW,
                          const int PT, const int PL) {
    const int q = get_global_id(0), r = get_global_id(1), i = get_global_id(2);
    const int P = Ho * Wo, K = Cin * KH * KW;
    if (q >= P || r >= K) return;
    const int c = r / (KH * KW), t = r - c * (KH * KW), kh = t / KW, kw = t - kh * KW;
    const int oh = q / Wo, ow = q - oh * Wo;
    const int ih = oh * SH - PT + kh * DH, iw = ow * SW - PL + kw * DW;
    const int n = firstImage + i;
    col[offCol + ((long)i * K + r) * P + q] =
        ((uint)ih < (uint)H && (uint)iw < (uint)W) ? x[((n * Cin + c) * H + ih) * W + iw] : 0.0f;
}
