//! Which runs drive a stack through its own interop endpoint (`--endpoint`, `--endpoint-recipe
//! FILE`, or a `--lut` with a recipe and no adapter), and their sides: the recipe's programs
//! built from `--lut-path`, the server's as the run's executable and, when the client is
//! another program, the client's as its client side (probes resolve each side's functions
//! against its own executable).

use anyhow::{Context, Result};
use nesquic_engine::custom_build;
use nesquic_engine::pair::ClientSide;
use nesquic_lut_adapters::endpoint::{recipe, Program, Recipe};
use nesquic_lut_adapters::Lut;

use super::RunArgs;

/// The server side and, when it is another program, the client side of `name`'s endpoint; `None`
/// when `name` runs through its adapter.
pub(super) fn resolve(
    args: &RunArgs,
    name: &str,
    testcase: &nesquic_testcases::Testcase,
) -> Result<Option<(ClientSide, Option<ClientSide>)>> {
    let Some(recipe) = recipe_for(args, name)? else { return Ok(None) };
    let path = args.lut_path.as_ref().with_context(|| {
        format!(
            "{name} runs through its own endpoint, built from a checkout of {}: add --lut-path CHECKOUT",
            recipe.repository
        )
    })?;
    let deps = args
        .lut_deps
        .iter()
        .map(|d| {
            d.split_once('=')
                .map(|(n, p)| (n.to_string(), std::path::PathBuf::from(p)))
                .with_context(|| format!("--lut-dep {d}: NAME=PATH expected"))
        })
        .collect::<Result<Vec<_>>>()?;
    let built = custom_build::endpoint::build(recipe, path, args.lut_rev.as_deref(), &deps)?;
    let descriptor = built.lut.descriptor();
    let io = args.io.unwrap_or(descriptor.io_modes[0]);
    descriptor.check_io(io)?;
    descriptor.check_workload(io, &testcase.workload).with_context(|| format!("testcase {}", testcase.name))?;
    let lut_options = args.lut_options(descriptor, io, &[])?;
    let server_binary = built.lut.program(Program::Server)?;
    let client_binary = built.lut.program(Program::Client)?;
    let client = (client_binary != server_binary).then(|| ClientSide {
        lut: Box::new(built.lut.clone()),
        lut_source: Some(built.source.clone()),
        binary: client_binary,
        io,
        lut_options: lut_options.clone(),
    });
    let server =
        ClientSide { lut: Box::new(built.lut), lut_source: Some(built.source), binary: server_binary, io, lut_options };
    Ok(Some((server, client)))
}

/// The recipe that drives `name`, if one does.
fn recipe_for(args: &RunArgs, name: &str) -> Result<Option<Recipe>> {
    if let Some(file) = &args.endpoint_recipe {
        let recipe = Recipe::load(file)?;
        anyhow::ensure!(
            recipe.name.eq_ignore_ascii_case(name),
            "--endpoint-recipe {}: it describes {}, not --lut {name}",
            file.display(),
            recipe.name
        );
        return Ok(Some(recipe));
    }
    let shipped = recipe::builtin(name).transpose()?;
    let adapter = nesquic_lut_adapters::find_lut(name).is_ok() || name.eq_ignore_ascii_case("exec");
    match (args.endpoint, adapter, shipped) {
        (_, false, Some(r)) | (true, true, Some(r)) => Ok(Some(r)),
        (true, _, None) => {
            let known: Vec<&str> = recipe::BUILTIN.iter().filter_map(|(f, _)| f.strip_suffix(".toml")).collect();
            anyhow::bail!(
                "--endpoint: Nesquic has no endpoint recipe for {name} (it has: {}); give one with --endpoint-recipe FILE",
                known.join(", ")
            )
        }
        _ => Ok(None),
    }
}
