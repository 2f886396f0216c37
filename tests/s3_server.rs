//! The private S3 endpoint the object-store tests run against
//! (`weir_tests::servers::S3`, SeaweedFS's `weed mini`): what they rely on
//! holds. A conditional create of an existing key is refused, objects
//! survive a crash and a restart on the same port and data (and nothing of
//! the server is left once it is dropped), and only requests signed with
//! its credentials are served, to a client configured from its `env()`.

use std::net::TcpStream;
use std::path::Path as FsPath;

use weir_tests::servers::object_store::aws::AmazonS3Builder;
use weir_tests::servers::object_store::path::Path;
use weir_tests::servers::object_store::{Error, ObjectStore, ObjectStoreExt, PutMode, PutPayload};
use weir_tests::servers::{PrivateServer, S3};

#[test]
fn a_conditional_create_of_an_existing_key_is_refused() {
    let s3 = S3::start();
    assert_eq!(s3.bucket(), "weir-os");
    assert_eq!(s3.url("out/"), "s3://weir-os/out/");
    let key = "manifests/epoch-1";
    let create = |bytes: &'static [u8]| {
        let payload = PutPayload::from_static(bytes);
        s3.block_on(
            s3.store()
                .put_opts(&Path::from(key), payload, PutMode::Create.into()),
        )
    };

    create(b"first").expect("creating a new key");
    match create(b"second") {
        Err(Error::AlreadyExists { .. }) => {}
        other => panic!("a second create of {key} gave {other:?}, not AlreadyExists"),
    }
    assert_eq!(s3.get(key).as_deref(), Some(&b"first"[..]));
    assert_eq!(s3.keys("manifests"), [key]);

    s3.delete(key);
    assert_eq!(s3.get(key), None);
    create(b"third").expect("creating a deleted key again");
    assert_eq!(s3.get(key).as_deref(), Some(&b"third"[..]));
}

#[test]
fn objects_survive_a_crash_and_a_restart_on_the_same_port() {
    let mut s3 = S3::start();
    s3.put("out/part-0", b"zero");
    s3.put("out/nested/part-1", b"one");
    s3.put("output", b"not under out/");
    let port = s3.port();

    s3.stop(); // SIGKILL
    assert!(!s3.is_running());
    s3.restart();
    assert_eq!(s3.port(), port);
    assert_eq!(s3.keys("out"), ["out/nested/part-1", "out/part-0"]);
    assert_eq!(s3.keys(""), ["out/nested/part-1", "out/part-0", "output"]);
    assert_eq!(s3.get("out/nested/part-1").as_deref(), Some(&b"one"[..]));
    s3.put("out/part-2", b"two");
    assert_eq!(s3.get("out/part-2").as_deref(), Some(&b"two"[..]));

    // Dropped, it leaves no process (nothing listens on its ports) and
    // none of the gRPC sockets it makes under /tmp.
    let dir = s3.dir().to_path_buf();
    drop(s3);
    for p in [port, port + 1, port + 10_000] {
        assert!(
            TcpStream::connect(("127.0.0.1", p)).is_err(),
            "something still listens on port {p}"
        );
    }
    for (i, server) in ["s3", "master", "volume", "filer", "admin"]
        .iter()
        .enumerate()
    {
        let socket = format!(
            "/tmp/seaweedfs-{server}-grpc-{}.sock",
            port + 10_000 + i as u16
        );
        assert!(!FsPath::new(&socket).exists(), "{socket} was left behind");
    }
    assert!(!dir.exists(), "{} was left behind", dir.display());
}

#[test]
fn only_requests_signed_with_its_credentials_are_served() {
    let s3 = S3::start();
    s3.put("secret", b"s");
    let env = s3.env();
    let var = |name: &str| &env.iter().find(|(n, _)| *n == name).unwrap().1;
    assert_eq!(var("AWS_ENDPOINT_URL"), &s3.endpoint());
    let key_id = var("AWS_ACCESS_KEY_ID");

    let wrong_secret = s3.store_with(key_id, "not-the-secret");
    let unknown_key = s3.store_with("someone-else", var("AWS_SECRET_ACCESS_KEY"));
    let unsigned = AmazonS3Builder::new()
        .with_endpoint(s3.endpoint())
        .with_allow_http(true)
        .with_region("us-east-1")
        .with_bucket_name(s3.bucket())
        .with_skip_signature(true)
        .build()
        .unwrap();
    let path = Path::from("secret");
    for (client, who) in [
        (&wrong_secret, "a wrong secret"),
        (&unknown_key, "an unknown key id"),
        (&unsigned, "no signature"),
    ] {
        let read = s3.block_on(client.get(&path));
        assert!(
            matches!(read, Err(Error::PermissionDenied { .. })),
            "a read with {who} gave {:?}",
            read.map(|r| r.meta)
        );
        let write = s3.block_on(client.put(&Path::from("intruder"), PutPayload::from_static(b"x")));
        assert!(
            matches!(write, Err(Error::PermissionDenied { .. })),
            "a write with {who} gave {write:?}"
        );
    }
    assert_eq!(s3.keys(""), ["secret"]);

    // A client configured from its environment and its URL alone, as a
    // `weir` process's (`AmazonS3Builder::from_env().with_url(..)`), is served.
    let mut from_env = AmazonS3Builder::new().with_url(s3.url(""));
    for (name, value) in &env {
        let key = name.to_ascii_lowercase().parse().unwrap();
        from_env = from_env.with_config(key, value);
    }
    let from_env = from_env.build().unwrap();
    let read = s3.block_on(async { from_env.get(&path).await?.bytes().await });
    assert_eq!(read.unwrap().as_ref(), b"s");
}
