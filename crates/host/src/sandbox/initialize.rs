//! Pre-initialization: a component's `wizer-initialize` export run once, and the instance it
//! leaves snapshotted into a new component (Wasmtime's Wizer). The snapshot keeps the export
//! (Wizer 48 cannot drop it from a component: the lift would dangle); the host never calls it,
//! and the Cedar module ignores a second call.
//!
//! `gatehouse policy pack` uses it to put a rule set, parsed, into the generic Cedar module
//! (`plugins/cedar`): every call then starts from the snapshot, so parsing the rules is paid
//! once at pack, not at each call, whose instance is fresh. The snapshot is a plain component
//! of the `policy` world, signed and loaded like any other.

use wasmtime::Store;
use wasmtime::component::{Component, ComponentExportIndex, Instance, Lift, WasmList};
use wasmtime_wizer::{ComponentInstanceState, Wizer};

use super::Sandbox;
use super::state::CallState;
use crate::caller::CallerGate;
use crate::egress::EgressGate;

/// The export the initializer is.
pub const INITIALIZER: &str = "wizer-initialize";

impl Sandbox {
    /// Runs `component`'s [`INITIALIZER`] with `input`, under this sandbox's default budgets
    /// and with no egress, and returns the snapshot. The component must otherwise implement
    /// the `policy` world.
    pub async fn pre_initialize(&self, component: &[u8], input: &str) -> Result<Vec<u8>, String> {
        let mut wizer = Wizer::new();
        wizer.keep_init_func(true);
        let (context, instrumented) = wizer
            .instrument_component(component)
            .map_err(|e| format!("cannot instrument the component: {e:#}"))?;
        let compiled = Component::new(&self.engine, &instrumented)
            .map_err(|e| format!("the instrumented component does not compile: {e:#}"))?;
        let limits = self.limits.clone();
        let (mut store, _) =
            self.prepare(&limits, EgressGate::deny_all(), CallerGate::none(), true);
        let instance = self
            .policy_linker
            .instantiate_async(&mut store, &compiled)
            .await
            .map_err(|e| format!("the component does not instantiate: {e:#}"))?;
        let init = instance
            .get_typed_func::<(&str,), ()>(&mut store, INITIALIZER)
            .map_err(|e| format!("the component has no `{INITIALIZER}(string)` export: {e:#}"))?;
        init.call_async(&mut store, (input,))
            .await
            .map_err(|e| format!("its `{INITIALIZER}` failed: {e:#}"))?;
        let mut state = Snapshot {
            store: &mut store,
            instance,
        };
        wizer
            .snapshot_component(&context, &mut state)
            .await
            .map_err(|e| format!("cannot snapshot the initialized component: {e:#}"))
    }
}

/// What Wizer reads the instance's state through: the accessor functions its instrumentation
/// exported. They cannot fail on a component Wizer instrumented; a failure is a bug, and
/// panics (the caller runs this on a thread of its own).
struct Snapshot<'a> {
    store: &'a mut Store<CallState>,
    instance: Instance,
}

impl Snapshot<'_> {
    async fn call<R: Lift + Send + Sync + 'static, T>(
        &mut self,
        instance: &str,
        func: &str,
        read: impl FnOnce(&Store<CallState>, R) -> T,
    ) -> T {
        let parent: ComponentExportIndex = self
            .instance
            .get_export_index(&mut *self.store, None, instance)
            .expect("Wizer exports its accessor instance");
        let index = self
            .instance
            .get_export_index(&mut *self.store, Some(&parent), func)
            .expect("Wizer exports each accessor");
        let typed = self
            .instance
            .get_typed_func::<(), (R,)>(&mut *self.store, index)
            .expect("an accessor has the type Wizer gave it");
        let (value,) = typed
            .call_async(&mut *self.store, ())
            .await
            .expect("an accessor does not trap");
        read(self.store, value)
    }
}

impl ComponentInstanceState for Snapshot<'_> {
    async fn call_func_ret_list_u8(
        &mut self,
        instance: &str,
        func: &str,
        contents: impl FnOnce(&[u8]) + Send,
    ) {
        self.call(instance, func, |store, list: WasmList<u8>| {
            contents(list.as_le_slice(store));
        })
        .await;
    }

    async fn call_func_ret_s32(&mut self, instance: &str, func: &str) -> i32 {
        self.call(instance, func, |_, v| v).await
    }

    async fn call_func_ret_s64(&mut self, instance: &str, func: &str) -> i64 {
        self.call(instance, func, |_, v| v).await
    }

    async fn call_func_ret_f32(&mut self, instance: &str, func: &str) -> u32 {
        self.call(instance, func, |_, v: f32| v.to_bits()).await
    }

    async fn call_func_ret_f64(&mut self, instance: &str, func: &str) -> u64 {
        self.call(instance, func, |_, v: f64| v.to_bits()).await
    }
}
