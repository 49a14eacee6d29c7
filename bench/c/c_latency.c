//  c_latency SUB PUB TOPIC RATE COUNT SIZE WARMUP_MS  (a driver bench/c_reference.py names)
//  One process, a dafka_consumer (offset reset latest) and a dafka_producer of TOPIC (each
//  an actor with its own sockets: the records go over TCP through ZeroMQ as between
//  processes). After WARMUP_MS it publishes warm-up records until the consumer got one,
//  then COUNT records of SIZE bytes at RATE records/s, each starting with the send time
//  (CLOCK_REALTIME, ns), and prints "latency N P50_US P99_US": publish -> the consumer's
//  recv returning it, over the N records received within 5 s of the last send.
//  It never outlives its cluster: a watchdog thread ends the process with status 3 when
//  nothing happened (no record received, no phase ended) for NO_PROGRESS_S seconds - a
//  cluster gone mid-run left it waiting forever, its producer holding unACKed records
//  (the producer is also told to end without their ACKs: producer/terminate_unacked).
#include <dafka.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#define NO_PROGRESS_S 20

static int64_t now_ns (void) {
    struct timespec t; clock_gettime (CLOCK_REALTIME, &t);
    return (int64_t) t.tv_sec * 1000000000 + t.tv_nsec;
}

//  When something last happened (ns, CLOCK_REALTIME), and what the process is doing.
static int64_t last_progress_ns;
static const char *volatile phase = "starting";

static void progress (const char *now_doing) {
    if (now_doing)
        phase = now_doing;
    __atomic_store_n (&last_progress_ns, now_ns (), __ATOMIC_RELAXED);
}

static void *watchdog (void *unused) {
    (void) unused;
    while (true) {
        sleep (1);
        int64_t idle = now_ns () - __atomic_load_n (&last_progress_ns, __ATOMIC_RELAXED);
        if (idle > (int64_t) NO_PROGRESS_S * 1000000000) {
            fprintf (stderr, "c_latency: no progress for %d s while %s (is its cluster gone?): exiting\n",
                     NO_PROGRESS_S, phase);
            fflush (stdout);
            _exit (3);
        }
    }
    return NULL;
}

static int cmp (const void *a, const void *b) {
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

//  Receives what arrives until `until_ns`, recording the latency of stamped records.
static void receive_until (dafka_consumer_t *consumer, dafka_consumer_msg_t *msg,
                           int64_t until_ns, double *lat, long *n, long max, bool *warm) {
    zsock_t *source = dafka_consumer_record_source (consumer);
    while (true) {
        int64_t left = until_ns - now_ns ();
        if (left <= 0) break;
        zsock_set_rcvtimeo (source, (int) (left / 1000000) + 1);
        if (dafka_consumer_msg_recv (msg, consumer) == -1) continue;  //  timeout
        int64_t at = now_ns ();
        __atomic_store_n (&last_progress_ns, at, __ATOMIC_RELAXED);
        const byte *content = dafka_consumer_msg_content (msg);
        size_t size = dafka_consumer_msg_content_size (msg);
        if (size >= 9 && content [0] == 't' && *n < max) {
            int64_t sent; memcpy (&sent, content + 1, 8);
            lat [(*n)++] = (at - sent) / 1000.0;
        }
        else if (size >= 1 && content [0] == 'w')
            *warm = true;
    }
}

int main (int argc, char *argv []) {
    if (argc != 8) { fprintf (stderr, "usage: c_latency SUB PUB TOPIC RATE COUNT SIZE WARMUP_MS\n"); return 2; }
    progress (NULL);
    pthread_t dog;
    if (pthread_create (&dog, NULL, watchdog, NULL) != 0) { fprintf (stderr, "c_latency: no watchdog thread\n"); return 1; }
    zsys_set_sndhwm (1000000);
    zsys_set_rcvhwm (1000000);
    zsys_set_linger (0);
    double rate = atof (argv [4]);
    long count = atol (argv [5]);
    size_t size = (size_t) atol (argv [6]);
    if (size < 9) size = 9;
    zconfig_t *config = zconfig_new ("root", NULL);
    zconfig_put (config, "beacon/sub_address", argv [1]);
    zconfig_put (config, "beacon/pub_address", argv [2]);
    zconfig_put (config, "beacon/address", "127.0.0.1");
    zconfig_put (config, "consumer/offset/reset", "latest");
    zconfig_put (config, "producer/terminate_unacked", "1");
    dafka_consumer_args_t cargs = { .config = config };
    dafka_consumer_t *consumer = dafka_consumer_new (&cargs);
    assert (consumer);
    int rc = dafka_consumer_subscribe (consumer, argv [3]);
    assert (rc == 0);
    dafka_producer_args_t pargs = { argv [3], config };
    zactor_t *producer = zactor_new (dafka_producer, &pargs);
    assert (producer);
    progress ("joining");
    zclock_sleep (atoi (argv [7]));
    progress ("warming up");
    dafka_consumer_msg_t *in = dafka_consumer_msg_new ();
    dafka_producer_msg_t *out = dafka_producer_msg_new ();
    byte *payload = (byte *) malloc (size);
    memset (payload, 'p', size);
    double *lat = (double *) calloc ((size_t) count, sizeof (double));
    long n = 0;
    bool warm = false;
    int64_t deadline = now_ns () + (int64_t) 30 * 1000000000;
    while (!warm) {  //  the consumer receives from the producer: the measured part may start
        if (now_ns () > deadline) { fprintf (stderr, "c_latency: no warm-up record\n"); return 1; }
        payload [0] = 'w';
        dafka_producer_msg_set_content_buffer (out, payload, size);
        dafka_producer_msg_send (out, producer);
        receive_until (consumer, in, now_ns () + 10000000, lat, &n, count, &warm);
    }
    receive_until (consumer, in, now_ns () + 200000000, lat, &n, count, &warm);
    n = 0;
    progress ("measuring");
    int64_t interval = (int64_t) (1e9 / rate);
    int64_t next = now_ns ();
    for (long i = 0; i < count; i++) {
        payload [0] = 't';
        int64_t stamp = now_ns ();
        memcpy (payload + 1, &stamp, 8);
        dafka_producer_msg_set_content_buffer (out, payload, size);
        dafka_producer_msg_send (out, producer);
        next += interval;
        receive_until (consumer, in, next, lat, &n, count, &warm);
    }
    receive_until (consumer, in, now_ns () + (int64_t) 5 * 1000000000 * (n < count), lat, &n, count, &warm);
    progress ("reporting");
    qsort (lat, (size_t) n, sizeof (double), cmp);
    printf ("latency %ld %.0f %.0f\n", n, n ? lat [n / 2] : -1.0, n ? lat [(long) (n * 0.99)] : -1.0);
    fflush (stdout);
    progress ("tearing down");
    free (lat);
    free (payload);
    dafka_producer_msg_destroy (&out);
    dafka_consumer_msg_destroy (&in);
    zactor_destroy (&producer);
    dafka_consumer_destroy (&consumer);
    zconfig_destroy (&config);
    return n > 0 ? 0 : 1;
}
