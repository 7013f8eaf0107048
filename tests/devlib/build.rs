fn main() {
    offload_build::build();
}
