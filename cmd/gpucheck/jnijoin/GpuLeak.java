// The JVM side of gpu-join.sh: a Java service whose JNI library allocates
// GPU memory through the CUDA driver API and never frees it. Every second,
// mode "joined" allocates <MiB> of device memory and pins <refs> Java
// objects with JNI global references it never deletes (a native object
// that owns GPU memory and holds Java objects, as an inference binding
// might); mode "alone" allocates the same GPU memory and pins nothing (a
// leak inside the GPU runtime, which no JVM account sees). It prints
// "leaked <gpu bytes> <refs>" each second and makes heap garbage so that
// collections happen.
//
// Arguments: <library> <mode: joined, alone> <MiB per second> <refs per
// second> <seconds before the GPU allocations begin> [device ordinal,
// default 0]. The references are pinned from the start: the JVM's own
// leak verdict on them is then in before the GPU memory has grown for a
// leak window, as when a service has run for a while.
public class GpuLeak {
    static native void init(int device);
    static native void leak(long bytes, int refs);

    static Object sink;

    public static void main(String[] args) throws Exception {
        System.load(args[0]);
        String mode = args[1];
        long bytes = Long.parseLong(args[2]) << 20;
        int refs = mode.equals("joined") ? Integer.parseInt(args[3]) : 0;
        long delay = Long.parseLong(args[4]);
        init(args.length > 5 ? Integer.parseInt(args[5]) : 0);
        long gpu = 0, pinned = 0;
        long next = System.nanoTime();
        for (long second = 0; ; second++) {
            long now = second >= delay ? bytes : 0;
            leak(now, refs);
            gpu += now;
            pinned += refs;
            System.out.println("leaked " + gpu + " " + pinned);
            for (int i = 0; i < 1000; i++) {
                sink = new byte[10240];
            }
            next += 1_000_000_000L;
            long wait = next - System.nanoTime();
            if (wait > 0) {
                Thread.sleep(wait / 1_000_000L, (int) (wait % 1_000_000L));
            }
        }
    }
}
